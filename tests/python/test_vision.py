"""Images through `deepinfer serve` on the tiny random LLaVA checkpoint
(tests/reference/make_tiny_llava.py), with the official `openai` and `anthropic` SDKs: greedy
tokens equal transformers' LlavaForConditionalGeneration.generate for prompts with 1 and 3
images in Chat Completions, Responses and Messages; bad images are 400s in each API's shape and
the server keeps serving; the embedding cache is hit by a repeated image."""
import base64
import json
import pathlib

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


def long_prefix_request(oai, image):
    # 4 blocks' worth of text before the image: those blocks may be shared, the image's may not.
    system = "You describe pictures carefully, one word at a time, and nothing else. " * 3
    msgs = [{"role": "system", "content": system},
            {"role": "user", "content": [{"type": "image_url", "image_url": {
                "url": f"data:{media(image)};base64,{image_b64(image)}"}}, {"type": "text", "text": "Describe."}]}]
    r = oai.chat.completions.create(model=MODEL, messages=msgs, max_tokens=6, temperature=0, logprobs=True)
    return [bytes(t.bytes) for t in r.choices[0].logprobs.content], r.usage


def test_a_cached_text_prefix_is_reused_but_another_images_blocks_are_not(oai):
    b_first, _ = long_prefix_request(oai, "lossy.webp")
    long_prefix_request(oai, "big.png")  # same text, same placeholder tokens, another image
    b_again, usage = long_prefix_request(oai, "lossy.webp")
    assert b_again == b_first
    cached = usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < usage.prompt_tokens - EXPECTED["tokens_per_image"]
