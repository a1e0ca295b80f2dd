"""Helpers for the KV store CLI tests: a same-size GGUF whose weights differ, and generate runs."""
import json
import os
import shutil
import struct

from conftest import run

# Long enough for many 16-token blocks.
PROMPT = ("Background: " + "The river flows past the old mill and the stone bridge. " * 10 +
          "Question: what flows past the mill?")


def _read_str(f):
    (n,) = struct.unpack("<Q", f.read(8))
    return f.read(n).decode("utf-8", "replace")


_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _skip_value(f, vtype):
    if vtype in _SCALAR:
        return f.read(_SCALAR[vtype])
    if vtype == 8:
        return _read_str(f)
    if vtype == 9:
        (etype,) = struct.unpack("<I", f.read(4))
        (n,) = struct.unpack("<Q", f.read(8))
        return [_skip_value(f, etype) for _ in range(n)]
    raise ValueError(f"GGUF value type {vtype}")


def gguf_tensors(path):
    """{name: (absolute data offset, ggml type, element count)} of a GGUF file (v2/v3)."""
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"
        _version, n_tensors, n_kv = struct.unpack("<IQQ", f.read(20))
        alignment = 32
        for _ in range(n_kv):
            key = _read_str(f)
            (vtype,) = struct.unpack("<I", f.read(4))
            value = _skip_value(f, vtype)
            if key == "general.alignment":
                alignment = struct.unpack("<I", value)[0]
        infos = []
        for _ in range(n_tensors):
            name = _read_str(f)
            (n_dims,) = struct.unpack("<I", f.read(4))
            dims = struct.unpack(f"<{n_dims}Q", f.read(8 * n_dims))
            ggml_type, offset = struct.unpack("<IQ", f.read(12))
            count = 1
            for d in dims:
                count *= d
            infos.append((name, ggml_type, offset, count))
        start = (f.tell() + alignment - 1) // alignment * alignment
    return {name: (start + off, t, count) for name, t, off, count in infos}


def write_changed_model(src, dst):
    """Writes `src`'s bytes to `dst` (in place when dst exists: same inode) with the quantized
    values of layer 0's K and V projections changed (Q4_1 nibbles XORed, scales untouched, so
    every value stays finite), then gives `dst` the original's mtime and atime to the ns."""
    tensors = gguf_tensors(src)
    data = bytearray(open(src, "rb").read())
    for name in ("blk.0.attn_k.weight", "blk.0.attn_v.weight"):
        offset, ggml_type, count = tensors[name]
        assert ggml_type == 3, f"{name}: expected Q4_1, got type {ggml_type}"
        for block in range(count // 32):
            base = offset + block * 20 + 4  # skip the f16 scale and min
            for i in range(16):
                data[base + i] ^= 0x37
    st = os.stat(src)
    with open(dst, "r+b" if os.path.exists(dst) else "wb") as f:
        f.write(data)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.path.getsize(dst) == st.st_size


def copy_model(src, dst):
    shutil.copyfile(src, dst)
    st = os.stat(src)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def generate(model, *extra, env=None, prompt=PROMPT):
    r = run("generate", "--model", model, "--prompt", prompt, "--max-tokens", "12",
            "--temperature", "0", "--json", "--no-chat", *extra, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[0])


def store_args(dirs):
    out = []
    for d in dirs:
        out += ["--kv-store", str(d)]
    return out


def home_env(tmp_path):
    """A private DEEPINFER_HOME (the weights-digest cache lives there)."""
    env = dict(os.environ)
    env["DEEPINFER_HOME"] = str(tmp_path / "home")
    return env
