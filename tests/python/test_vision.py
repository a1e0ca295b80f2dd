"""Images through `deepinfer serve` on the tiny random LLaVA checkpoint
(tests/reference/make_tiny_llava.py), with the official `openai` and `anthropic` SDKs: greedy
tokens equal transformers' LlavaForConditionalGeneration.generate for prompts with 1 and 3
images in Chat Completions, Responses and Messages; bad images are 400s in each API's shape and
the server keeps serving; the embedding cache is hit by a repeated image; the prefix cache reuses
KV through an image only for the same image bytes at the same place (batch-invariant outputs equal
a cold server's bitwise)."""
import base64
import json
import pathlib
import struct
import zlib

import anthropic
import openai
import pytest

from server_util import Server

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "reference" / "fixtures"
MODEL_DIR = FIX / "tiny_llava"
IMAGES = FIX / "vision" / "images"
EXPECTED = json.loads((MODEL_DIR / "expected.json").read_text())
MODEL = "tiny-llava"
MEDIA = {"jpg": "image/jpeg", "png": "image/png", "webp": "image/webp"}


def image_b64(name):
    return base64.b64encode((IMAGES / name).read_bytes()).decode()


def media(name):
    return MEDIA[name.rsplit(".", 1)[1]]


def expected_text(case):
    return b"".join(bytes(b) for b in case["greedy_bytes"]).decode("utf-8", errors="replace")


def openai_messages(case):
    out = []
    for m in case["messages"]:
        if isinstance(m["content"], str):
            out.append(m)
            continue
        parts = []
        for p in m["content"]:
            if p["type"] == "image":
                url = f"data:{media(p['file'])};base64,{image_b64(p['file'])}"
                parts.append({"type": "image_url", "image_url": {"url": url, "detail": "auto"}})
            else:
                parts.append(p)
        out.append({"role": m["role"], "content": parts})
    return out


@pytest.fixture(scope="module")
def server():
    s = Server(MODEL_DIR, "--served-model-name", MODEL)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def claude(server):
    return anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0, timeout=120)


@pytest.mark.parametrize("case", EXPECTED["cases"], ids=lambda c: c["name"])
def test_chat_completions_greedy_tokens_equal_transformers(oai, case):
    r = oai.chat.completions.create(model=MODEL, messages=openai_messages(case), max_tokens=8, temperature=0,
                                    logprobs=True)
    got = [bytes(t.bytes) for t in r.choices[0].logprobs.content]
    assert got == [bytes(b) for b in case["greedy_bytes"]]
    assert r.usage.prompt_tokens == len(case["prompt_ids"])


@pytest.mark.parametrize("case", EXPECTED["cases"], ids=lambda c: c["name"])
def test_responses_greedy_text_equals_transformers(oai, case):
    items = []
    for m in case["messages"]:
        if isinstance(m["content"], str):
            items.append({"role": m["role"], "content": m["content"]})
            continue
        parts = []
        for p in m["content"]:
            if p["type"] == "image":
                parts.append({"type": "input_image", "detail": "auto",
                              "image_url": f"data:{media(p['file'])};base64,{image_b64(p['file'])}"})
            else:
                parts.append({"type": "input_text", "text": p["text"]})
        items.append({"role": m["role"], "content": parts})
    r = oai.responses.create(model=MODEL, input=items, max_output_tokens=8, temperature=0)
    assert r.output_text == expected_text(case)
    assert r.usage.input_tokens == len(case["prompt_ids"])


@pytest.mark.parametrize("case", EXPECTED["cases"], ids=lambda c: c["name"])
def test_messages_greedy_text_equals_transformers(claude, case):
    system = None
    msgs = []
    for m in case["messages"]:
        if m["role"] == "system":
            system = m["content"]
            continue
        blocks = []
        for p in m["content"]:
            if p["type"] == "image":
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": media(p["file"]),
                                                           "data": image_b64(p["file"])}})
            else:
                blocks.append({"type": "text", "text": p["text"]})
        msgs.append({"role": m["role"], "content": blocks})
    kwargs = {"system": system} if system else {}
    r = claude.messages.create(model=MODEL, max_tokens=8, messages=msgs, extra_body={"temperature": 0}, **kwargs)
    assert r.content[0].text == expected_text(case)
    # Anthropic's input_tokens is the uncached part (the text before the first image may be cached).
    assert r.usage.input_tokens + r.usage.cache_read_input_tokens == len(case["prompt_ids"])


def bad_image_request(oai, url):
    return oai.chat.completions.create(
        model=MODEL, max_tokens=2,
        messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                               {"type": "text", "text": "hi"}]}])


def truncated_jpeg():
    return base64.b64encode((IMAGES / "rgb.jpg").read_bytes()[:400]).decode()


def huge_jpeg():
    b = bytearray((IMAGES / "rgb.jpg").read_bytes())
    i = next(i for i in range(2, len(b) - 9) if b[i] == 0xFF and b[i + 1] in (0xC0, 0xC2))
    b[i + 5:i + 9] = bytes([10000 >> 8, 10000 & 0xFF, 10000 >> 8, 10000 & 0xFF])
    return base64.b64encode(bytes(b)).decode()


@pytest.mark.parametrize("url,words", [
    ("data:image/jpeg;base64," + "", "empty"),
    ("https://example.com/cat.png", "remote image URLs are not fetched"),
    ("data:image/gif;base64," + base64.b64encode(b"GIF89a\x01\x00\x01\x00\x00\x00\x00").decode(), "GIF"),
    ("data:image/png;base64,!!!notbase64", "not valid base64"),
], ids=["empty", "remote", "gif", "base64"])
def test_bad_images_are_400s_in_openai_shape(oai, url, words):
    with pytest.raises(openai.BadRequestError) as e:
        bad_image_request(oai, url)
    assert words in str(e.value)


def test_truncated_and_100_megapixel_images_are_400s_and_the_server_keeps_serving(oai, claude):
    with pytest.raises(openai.BadRequestError) as e:
        bad_image_request(oai, "data:image/jpeg;base64," + truncated_jpeg())
    assert "corrupt" in str(e.value) or "truncated" in str(e.value)
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model=MODEL, max_tokens=2, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": huge_jpeg()}}]}])
    assert "100.0 megapixels" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model=MODEL, max_tokens=2, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image_b64('rgba.png')}"}}] * 9}])
    assert "at most 8 are accepted" in str(e.value)
    case = EXPECTED["cases"][0]
    r = oai.chat.completions.create(model=MODEL, messages=openai_messages(case), max_tokens=8, temperature=0,
                                    logprobs=True)
    assert [bytes(t.bytes) for t in r.choices[0].logprobs.content] == [bytes(b) for b in case["greedy_bytes"]]


def test_repeated_image_hits_the_embedding_cache(server, oai):
    case = EXPECTED["cases"][0]
    oai.chat.completions.create(model=MODEL, messages=openai_messages(case), max_tokens=1, temperature=0)
    before = server.metrics()
    oai.chat.completions.create(model=MODEL, messages=openai_messages(case), max_tokens=1, temperature=0)
    after = server.metrics()
    assert after["deepinfer_image_cache_hits_total"] == before["deepinfer_image_cache_hits_total"] + 1
    assert after["deepinfer_images_encoded_total"] == before["deepinfer_images_encoded_total"]


def test_image_to_a_text_only_model_is_a_400(model):
    s = Server(model, "--served-model-name", "text-only")
    try:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=60)
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="text-only", max_tokens=2, messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image_b64('rgba.png')}"}}]}])
        assert "does not accept images" in str(e.value)
    finally:
        s.stop()


def test_generate_jsonl_with_images_equals_transformers(tmp_path):
    from conftest import run
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = []
    for case in EXPECTED["cases"]:
        msgs = []
        for m in case["messages"]:
            if isinstance(m["content"], str):
                msgs.append(m)
                continue
            msgs.append({"role": m["role"], "content": [
                {"type": "image", "path": str(IMAGES / p["file"])} if p["type"] == "image" else p
                for p in m["content"]]})
        lines.append({"messages": msgs, "max_tokens": 8, "temperature": 0})
    # The same first image as a data: URL.
    url = f"data:image/jpeg;base64,{image_b64('rgb.jpg')}"
    first = json.loads(json.dumps(lines[0]))
    first["messages"][0]["content"][0] = {"type": "image_url", "image_url": {"url": url}}
    lines.append(first)
    inp.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    r = run("generate", "--model", MODEL_DIR, "--input", inp, "--output", out)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    cases = EXPECTED["cases"] + [EXPECTED["cases"][0]]
    assert [x["token_ids"] for x in recs] == [c["greedy"] for c in cases]
    assert [x["usage"]["prompt_tokens"] for x in recs] == [len(c["prompt_ids"]) for c in cases]


def test_generate_jsonl_bad_image_names_the_line(tmp_path):
    from conftest import run
    inp = tmp_path / "bad.jsonl"
    inp.write_text(json.dumps({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + truncated_jpeg()}}]}]}) + "\n")
    r = run("generate", "--model", MODEL_DIR, "--input", inp, "--max-tokens", "2")
    assert r.returncode == 2, r.stderr
    assert "bad.jsonl:1" in r.stderr and "image 1" in r.stderr


def png_chunks(data):
    """(type, body) of each chunk of a PNG file."""
    out, i = [], 8
    while i < len(data):
        n = struct.unpack(">I", data[i:i + 4])[0]
        out.append((data[i + 4:i + 8], data[i + 8:i + 8 + n]))
        i += 12 + n
    return out


def png_from_chunks(chunks):
    body = b"".join(struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b)) for t, b in chunks)
    return b"\x89PNG\r\n\x1a\n" + body


def png_variant(name, flip=0):
    """The PNG re-encoded (its pixel stream recompressed at another zlib level): the same pixels in
    other bytes; with flip, every sample byte also XORed with it: another image of the same size."""
    chunks = png_chunks((IMAGES / name).read_bytes())
    ihdr = chunks[0][1]
    width, _, depth, color = struct.unpack(">IIBB", ihdr[:10])
    stride = 1 + (width * {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color] * depth + 7) // 8
    raw = bytearray(zlib.decompress(b"".join(b for t, b in chunks if t == b"IDAT")))
    if flip:
        for i in range(len(raw)):
            if i % stride:  # not the row's filter byte
                raw[i] ^= flip
    rest = [(t, b) for t, b in chunks if t not in (b"IDAT", b"IEND")]
    return png_from_chunks(rest + [(b"IDAT", zlib.compress(bytes(raw), 1)), (b"IEND", b"")])


SYSTEM = "You describe pictures carefully, one word at a time, and nothing else. " * 3
AFTER = "Describe the picture in detail: its colours, its shapes and what it could be."


def image_turn(image_bytes, mime="image/png"):
    url = f"data:{mime};base64,{base64.b64encode(image_bytes).decode()}"
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                         {"type": "text", "text": AFTER}]}]


def ask(client, msgs, max_tokens=6):
    r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=max_tokens, temperature=0,
                                       logprobs=True, top_logprobs=3)
    lps = [(t.token, t.logprob, [(x.token, x.logprob) for x in t.top_logprobs]) for t in r.choices[0].logprobs.content]
    return r.choices[0].message.content, lps, r.usage


@pytest.fixture(scope="module")
def bi_servers():
    """Two batch-invariant servers: one whose prefix cache the tests warm, one kept cold."""
    warm = Server(MODEL_DIR, "--served-model-name", MODEL, "--batch-invariant")
    cold = Server(MODEL_DIR, "--served-model-name", MODEL, "--batch-invariant")
    clients = [openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=120)
               for s in (warm, cold)]
    yield clients
    warm.stop()
    cold.stop()


_unseen = iter(range(1, 256))


def text_prefix_hit(client):
    """Cached tokens of a request with SYSTEM then an image this server never saw: the text
    prefix before the image, rounded down to a block (the request warms that prefix first)."""
    ask(client, image_turn(png_variant("palette.png", next(_unseen))), 1)
    _, _, u = ask(client, image_turn(png_variant("rgba.png", next(_unseen))), 1)
    return u.prompt_tokens_details.cached_tokens


def test_a_second_turn_reuses_the_prefix_through_the_image_and_equals_a_cold_run(bi_servers):
    warm, cold = bi_servers
    before_image = text_prefix_hit(warm)
    big = (IMAGES / "big.png").read_bytes()
    text1, _, u1 = ask(warm, image_turn(big))
    turn2 = image_turn(big) + [{"role": "assistant", "content": text1},
                               {"role": "user", "content": "And what else is in it?"}]
    got = ask(warm, turn2)
    want = ask(cold, turn2)
    cached = got[2].prompt_tokens_details.cached_tokens
    assert cached >= before_image + EXPECTED["tokens_per_image"], (cached, before_image)
    assert cached >= u1.prompt_tokens - 16  # all of turn 1's full blocks
    assert want[2].prompt_tokens_details.cached_tokens == 0
    assert got[:2] == want[:2]  # text, tokens and logprobs, bitwise


def test_another_image_of_the_same_size_at_the_same_place_does_not_hit_past_it(bi_servers):
    warm, cold = bi_servers
    before_image = text_prefix_hit(warm)
    ask(warm, image_turn((IMAGES / "big.png").read_bytes()))
    other = image_turn(png_variant("big.png", 0x5A))  # 75x50 too, other pixels
    got = ask(warm, other)
    assert got[2].prompt_tokens_details.cached_tokens == before_image
    assert got[:2] == ask(cold, other)[:2]


def test_the_same_pixels_in_other_bytes_are_another_key(bi_servers):
    # Keys (the embedding cache's and the KV blocks') are over the encoded bytes: a re-encoded PNG
    # with identical pixels is encoded again and recomputed from the image on (docs/vision.md).
    warm, cold = bi_servers
    before_image = text_prefix_hit(warm)
    original = (IMAGES / "big.png").read_bytes()
    reencoded = png_variant("big.png")
    assert reencoded != original
    first = ask(warm, image_turn(original))
    again = ask(warm, image_turn(reencoded))
    assert again[2].prompt_tokens_details.cached_tokens == before_image
    assert again[:2] == first[:2]  # the same pixels: the same output


def test_the_kv_store_serves_image_blocks_by_image_after_a_restart(tmp_path):
    store = tmp_path / "kv"
    big = (IMAGES / "big.png").read_bytes()

    def start():
        s = Server(MODEL_DIR, "--served-model-name", MODEL, "--batch-invariant", "--kv-store", store)
        return s, openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=120)

    s, client = start()
    try:
        first = ask(client, image_turn(big))
    finally:
        assert s.stop() == 0
    s, client = start()  # an empty prefix cache in RAM: hits come from the store
    try:
        again = ask(client, image_turn(big))
        before_image = text_prefix_hit(client)
        other = ask(client, image_turn(png_variant("big.png", 0x33)))
    finally:
        assert s.stop() == 0
    assert again[2].prompt_tokens_details.cached_tokens >= before_image + EXPECTED["tokens_per_image"]
    assert again[:2] == first[:2]
    assert other[2].prompt_tokens_details.cached_tokens == before_image


def test_bench_vision_mode_reports_encode_rate_and_ttft_by_cache_state(model):
    from conftest import run
    r = run("bench", "--mode", "vision", "--model", MODEL_DIR, "--image", IMAGES / "big.png", "--repeat", "2",
            "--threads", "1")
    assert r.returncode == 0, r.stderr
    rows = {j["phase"]: j for j in map(json.loads, r.stdout.splitlines())}
    assert list(rows) == ["encode", "text_only", "image_cold", "image_embedding_cached", "image_prefix_cached"]
    assert rows["encode"]["images"] == 8 and rows["encode"]["images_per_s"] > 0
    assert rows["encode"]["tokens_per_image"] == EXPECTED["tokens_per_image"]
    n = rows["image_cold"]["prompt_tokens"]
    assert n == rows["text_only"]["prompt_tokens"] + EXPECTED["tokens_per_image"]
    assert rows["image_cold"]["cached_tokens"] < 16  # at most the chat header before the nonce
    assert rows["image_embedding_cached"]["cached_tokens"] == rows["image_cold"]["cached_tokens"]
    assert rows["image_prefix_cached"]["cached_tokens"] >= n - 16  # through the image
    assert all(j["mode"] == "vision" and j["ttft_ms"] > 0 for p, j in rows.items() if p != "encode")
    r = run("bench", "--mode", "vision", "--model", MODEL_DIR)
    assert r.returncode != 0 and "needs --image FILE" in r.stderr
    r = run("bench", "--mode", "vision", "--model", model, "--image", IMAGES / "big.png")
    assert r.returncode != 0 and "has no vision encoder" in r.stderr
