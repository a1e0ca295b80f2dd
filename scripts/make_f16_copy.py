#!/usr/bin/env python3
"""Writes a higher-precision copy of a quantized GGUF model: every quantized tensor dequantized
to F16 (float tensors kept), the metadata (tokenizer, config) copied. The copy and the original
share the tokenizer, so the quantized original can draft for the copy:

    python3 scripts/make_f16_copy.py IN.gguf OUT.gguf        (needs `pip install gguf`)
    deepinfer generate --model OUT.gguf --speculative draft --draft-model IN.gguf ...
"""
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize

KEEP = {GGMLQuantizationType.F32, GGMLQuantizationType.F16}


def copy_fields(reader, writer):
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue  # the header, and the architecture the writer already wrote
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def main(src, dst):
    reader = GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(dst, arch)
    copy_fields(reader, writer)
    for t in reader.tensors:
        if t.tensor_type in KEEP:
            data = np.array(t.data)
        else:
            data = dequantize(t.data, t.tensor_type).astype(np.float16)
        # GGUF lists dims fastest first; numpy wants them slowest first.
        writer.add_tensor(t.name, data.reshape(tuple(int(d) for d in reversed(t.shape))))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
