"""A byte-level BPE tokenizer.json with no merges (token id = byte value, for the first
`size` bytes), written next to the tiny reference checkpoints, which come without one."""
import json


def byte_level_unicode():
    # GPT-2's byte -> printable character table, as byte-level BPE tokenizer.json files use.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_byte_tokenizer(model_dir, size=128):
    table = byte_level_unicode()
    tok = {"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None, "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "vocab": {table[b]: b for b in range(size)}, "merges": []}}
    (model_dir / "tokenizer.json").write_text(json.dumps(tok))
