"""Reading and writing safetensors files without torch, for tests that build small checkpoints."""
import json
import struct


def read_safetensors(path):
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    return {k: ({"dtype": v["dtype"], "shape": v["shape"]}, body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, (meta, blob) in tensors.items():
        header[name] = dict(meta, data_offsets=[offset, offset + len(blob)])
        blobs.append(blob)
        offset += len(blob)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))
