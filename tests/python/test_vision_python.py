"""Images through the Python package (`LLM.chat` with OpenAI-style content parts) on the tiny
random LLaVA checkpoint: greedy tokens equal transformers' LlavaForConditionalGeneration.generate
with images as data: URLs, raw bytes and file paths; a second turn reuses the prefix cache through
the image with output equal to an engine without the cache (logprobs bitwise, batch-invariant);
a prefix hit ending inside an image equals a cold run; bad parts are ValueErrors that name the
part. Needs the package (`pip install .`), as test_python_api.py does."""
import base64
import json
import pathlib

import pytest

from conftest import IN_CI, MODEL as TEXT_MODEL

try:
    from deepinfer import LLM, SamplingParams
except ImportError as e:  # not installed
    if IN_CI:
        raise
    pytest.skip(f"deepinfer is not installed ({e}): run `python3 -m pip install .`", allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "reference" / "fixtures"
MODEL_DIR = FIX / "tiny_llava"
IMAGES = FIX / "vision" / "images"
EXPECTED = json.loads((MODEL_DIR / "expected.json").read_text())
MEDIA = {"jpg": "image/jpeg", "png": "image/png", "webp": "image/webp"}
GREEDY = SamplingParams(max_tokens=8, temperature=0.0)


def data_url(name):
    return f"data:{MEDIA[name.rsplit('.', 1)[1]]};base64,{base64.b64encode((IMAGES / name).read_bytes()).decode()}"


def messages(case, how):
    """The case's messages with each image as a data: URL, raw bytes or a file path."""
    out = []
    for m in case["messages"]:
        if isinstance(m["content"], str):
            out.append(m)
            continue
        parts = []
        for p in m["content"]:
            if p["type"] != "image":
                parts.append(p)
            elif how == "url":
                parts.append({"type": "image_url", "image_url": {"url": data_url(p["file"]), "detail": "auto"}})
            elif how == "bytes":
                parts.append({"type": "image", "image": (IMAGES / p["file"]).read_bytes()})
            else:
                parts.append({"type": "image", "image": IMAGES / p["file"]})
        out.append({"role": m["role"], "content": parts})
    return out


@pytest.fixture(scope="module")
def llm():
    return LLM(model=str(MODEL_DIR), batch_invariant=True)


@pytest.mark.parametrize("how", ["url", "bytes", "path"])
def test_greedy_tokens_equal_transformers(llm, how):
    outs = llm.chat([messages(c, how) for c in EXPECTED["cases"]], GREEDY)
    assert [o.outputs[0].token_ids for o in outs] == [c["greedy"] for c in EXPECTED["cases"]]
    assert [o.prompt_token_ids for o in outs] == [c["prompt_ids"] for c in EXPECTED["cases"]]
    assert "<image>" in outs[0].prompt


def test_a_second_turn_reuses_the_prefix_through_the_image(llm):
    sp = SamplingParams(max_tokens=6, temperature=0.0, logprobs=3)
    system = {"role": "system", "content": "You describe pictures carefully, one word at a time. " * 3}
    turn1 = [system, {"role": "user", "content": [{"type": "image", "image": IMAGES / "big.png"},
                                                  {"type": "text", "text": "Describe its colours and shapes."}]}]
    first = llm.chat(turn1, sp)[0]
    turn2 = turn1 + [{"role": "assistant", "content": first.outputs[0].text},
                     {"role": "user", "content": "And what else?"}]
    got = llm.chat(turn2, sp)[0]
    image_end = got.prompt_token_ids.index(EXPECTED["image_token_id"]) + EXPECTED["tokens_per_image"]
    assert got.num_cached_tokens >= image_end
    cold = LLM(model=str(MODEL_DIR), batch_invariant=True, enable_prefix_caching=False).chat(turn2, sp)[0]
    assert cold.num_cached_tokens == 0
    assert got.outputs[0].token_ids == cold.outputs[0].token_ids
    assert got.outputs[0].logprobs == cold.outputs[0].logprobs


def user(*parts):
    return [{"role": "user", "content": list(parts)}]


@pytest.mark.parametrize("part,words", [
    ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, "remote image URLs are not fetched"),
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,!!!"}}, "not valid base64"),
    ({"type": "image_url", "image_url": {"url": "x", "detail": "ultra"}}, "detail must be auto, low or high"),
    ({"type": "image", "image": "/nonexistent/cat.png"}, "cannot read image file '/nonexistent/cat.png'"),
    ({"type": "image", "image": b""}, "the image is empty"),
    ({"type": "image", "image": b"GIF89a\x01\x00\x01\x00\x00\x00\x00"}, "image 1"),
    ({"type": "image", "image": 7}, "an image part needs 'image'"),
    ({"type": "audio", "audio": "x"}, "a part must be"),
], ids=["remote", "base64", "detail", "missing-file", "empty", "gif", "wrong-type", "unknown-part"])
def test_bad_parts_are_value_errors_naming_the_part(llm, part, words):
    with pytest.raises(ValueError) as e:
        llm.chat(user({"type": "text", "text": "hi"}, part), GREEDY)
    assert words in str(e.value)
    assert "messages[0].content[1]" in str(e.value) or "image 1" in str(e.value)
    # The engine keeps working.
    out = llm.chat(messages(EXPECTED["cases"][0], "url"), GREEDY)
    assert out[0].outputs[0].token_ids == EXPECTED["cases"][0]["greedy"]


def test_too_many_images_is_a_value_error(llm):
    with pytest.raises(ValueError, match="at most 8 are accepted"):
        llm.chat(user(*[{"type": "image", "image": IMAGES / "rgba.png"}] * 9), GREEDY)


def test_an_image_to_a_text_only_model_is_a_value_error():
    if not TEXT_MODEL.exists():
        pytest.skip(f"{TEXT_MODEL} is missing")
    with pytest.raises(ValueError, match="does not accept images"):
        LLM(model=str(TEXT_MODEL)).chat(user({"type": "image", "image": IMAGES / "rgba.png"}), GREEDY)


def test_text_only_parts_work_on_any_model(llm):
    a = llm.chat(user({"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}), GREEDY)
    b = llm.chat([{"role": "user", "content": "Hello there"}], GREEDY)
    assert a[0].outputs[0].token_ids == b[0].outputs[0].token_ids


def test_a_hit_that_ends_inside_an_image_feeds_the_rest_of_its_rows(llm):
    # Texts of several lengths before the image: some second requests hit up to a block boundary
    # that falls inside the image, so the remaining image rows come from its embeddings.
    sp = SamplingParams(max_tokens=4, temperature=0.0, logprobs=2)
    cold_llm = LLM(model=str(MODEL_DIR), batch_invariant=True, enable_prefix_caching=False)
    inside = 0
    for n in range(1, 17):
        conv = user({"type": "text", "text": "word " * n}, {"type": "image", "image": IMAGES / "grey.jpg"},
                    {"type": "text", "text": "Hi"})
        llm.chat(conv, sp)
        got = llm.chat(conv, sp)[0]
        start = got.prompt_token_ids.index(EXPECTED["image_token_id"])
        if start < got.num_cached_tokens < start + EXPECTED["tokens_per_image"]:
            inside += 1
            cold = cold_llm.chat(conv, sp)[0]
            assert (got.outputs[0].token_ids, got.outputs[0].logprobs) == \
                (cold.outputs[0].token_ids, cold.outputs[0].logprobs), n
    assert inside > 0
