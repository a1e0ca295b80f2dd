#!/usr/bin/env python3
"""Writes tests/reference/fixtures/quant_fixture.{bin,json}: random valid GGUF blocks with their
dequantized values, and random float rows with their quantized bytes, all computed by the PyPI
`gguf` package (gguf.quants, bit-exact with ggml). The C++ test tests/unit/quant compares exactly.

Usage: python3 tests/reference/make_quant_fixture.py
"""
import json
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")

# Byte offsets of the fp16 scale fields inside one block; random bytes there would give NaN/inf,
# so they get random finite halves instead.
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
DEQUANT_BLOCKS = 24
QUANT_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
QUANT_BLOCKS = 40


def random_blocks(rng, qtype, n_blocks):
    block_elems, block_bytes = quants.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        halves = (rng.standard_normal(n_blocks) * 0.05).astype(np.float16)
        raw[:, off:off + 2] = halves.view(np.uint8).reshape(n_blocks, 2)
    return raw, block_elems


def random_rows(rng, n):
    x = rng.standard_normal(n).astype(np.float32) * np.float32(2.0)
    x[:32] = 0.0                     # an all-zero block (d == 0 path)
    x[32:64] = np.float32(0.5)        # a constant block
    x[64:96] *= np.float32(1e-3)      # a tiny-scale block
    x[100] = np.float32(-40.0)        # a negative extreme
    return x


def main():
    rng = np.random.default_rng(1234)
    blob = bytearray()
    index = []

    def put(arr):
        off = len(blob)
        blob.extend(np.ascontiguousarray(arr).tobytes())
        return off, len(blob) - off

    for qtype, _ in F16_FIELDS.items():
        raw, block_elems = random_blocks(rng, qtype, DEQUANT_BLOCKS)
        out = quants.dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert out.size == DEQUANT_BLOCKS * block_elems
        in_off, in_len = put(raw)
        out_off, out_len = put(out)
        index.append({"op": "dequantize", "type": qtype.name, "ggml_id": int(qtype),
                      "n": int(out.size), "in_offset": in_off, "in_bytes": in_len,
                      "out_offset": out_off, "out_bytes": out_len})

    for qtype in QUANT_TYPES:
        x = random_rows(rng, QUANT_BLOCKS * 32)
        q = quants.quantize(x.reshape(1, -1), qtype).reshape(-1)
        in_off, in_len = put(x)
        out_off, out_len = put(q)
        index.append({"op": "quantize", "type": qtype.name, "ggml_id": int(qtype),
                      "n": int(x.size), "in_offset": in_off, "in_bytes": in_len,
                      "out_offset": out_off, "out_bytes": out_len})

    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "quant_fixture.bin"), "wb") as f:
        f.write(bytes(blob))
    with open(os.path.join(OUT_DIR, "quant_fixture.json"), "w") as f:
        json.dump({"generator": "tests/reference/make_quant_fixture.py",
                   "gguf_version": getattr(__import__("gguf"), "__version__", "unknown"),
                   "entries": index}, f, indent=1)
    print(f"wrote {len(blob)} bytes, {len(index)} entries")


if __name__ == "__main__":
    main()
