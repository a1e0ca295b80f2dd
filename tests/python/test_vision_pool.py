"""The vision encoder as its own pool (issue 26): `serve --role vision` on the tiny LLaVA
checkpoint, and an LLM server started with `--vision-encoder URL` that sends it every image.
Greedy tokens through the pool equal transformers' LlavaForConditionalGeneration.generate (1 and
3 images, Chat Completions and Messages); bad images come back as 400s; the pool's metrics count
the encodings; with the pool gone, image requests get 503 naming it while text requests are still
served; wrong flags and a text-only model are refused with one line. And images through the
disaggregated deployment: the entrypoint gets the embeddings from the pool and carries them to the
prefill and decode engines (same greedy tokens)."""
import subprocess
import time
import urllib.error
import urllib.request

import anthropic
import openai
import pytest

from conftest import BINARY
from pd_util import MODEL_NAME as PD_MODEL_NAME, Cluster
from server_util import Server, free_port
from test_vision import EXPECTED, MODEL, MODEL_DIR, expected_text, image_b64, media, openai_messages, truncated_jpeg


class VisionPool:
    def __init__(self, model_dir):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([str(BINARY), "serve", "--role", "vision", "--model", str(model_dir),
                                      "--port", str(self.port), "--threads", "1"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            assert self.proc.poll() is None, self.proc.stdout.read()
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        raise RuntimeError("the vision pool did not start")

    def metrics(self):
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in r.read().decode().splitlines()
                                              if line and not line.startswith("#"))}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        return self.proc.returncode


@pytest.fixture(scope="module")
def pool():
    p = VisionPool(MODEL_DIR)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def llm(pool):
    s = Server(MODEL_DIR, "--served-model-name", MODEL, "--vision-encoder", pool.url)
    yield s
    s.stop()


@pytest.mark.parametrize("case", EXPECTED["cases"], ids=lambda c: c["name"])
def test_greedy_tokens_through_the_pool_equal_transformers(llm, case):
    oai = openai.OpenAI(base_url=llm.url + "/v1", api_key="none", max_retries=0, timeout=120)
    r = oai.chat.completions.create(model=MODEL, messages=openai_messages(case), max_tokens=8, temperature=0,
                                    logprobs=True)
    assert [bytes(t.bytes) for t in r.choices[0].logprobs.content] == [bytes(b) for b in case["greedy_bytes"]]


def test_messages_through_the_pool_and_the_pool_counts_its_work(llm, pool):
    before = pool.metrics()["deepinfer_vision_images_encoded_total"]
    claude = anthropic.Anthropic(base_url=llm.url, api_key="none", max_retries=0, timeout=120)
    case = EXPECTED["cases"][-1]
    system, msgs = None, []
    for m in case["messages"]:
        if m["role"] == "system":
            system = m["content"]
            continue
        msgs.append({"role": m["role"], "content": [
            {"type": "image", "source": {"type": "base64", "media_type": media(p["file"]), "data": image_b64(p["file"])}}
            if p["type"] == "image" else {"type": "text", "text": p["text"]} for p in m["content"]]})
    kwargs = {"system": system} if system else {}
    r = claude.messages.create(model=MODEL, max_tokens=8, messages=msgs, extra_body={"temperature": 0}, **kwargs)
    assert r.content[0].text == expected_text(case)
    m = pool.metrics()
    # Images the LLM server had not seen yet were encoded by the pool (repeats hit its own cache).
    assert m["deepinfer_vision_images_encoded_total"] >= before
    assert m["deepinfer_vision_images_encoded_total"] >= 1
    assert m["deepinfer_vision_encode_seconds_count"] >= 1


def test_a_bad_image_is_a_400_from_the_pool(llm, pool):
    oai = openai.OpenAI(base_url=llm.url + "/v1", api_key="none", max_retries=0, timeout=120)
    failures = pool.metrics()["deepinfer_vision_failures_total"]
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model=MODEL, max_tokens=2, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + truncated_jpeg()}}]}])
    assert "corrupt" in str(e.value) or "truncated" in str(e.value)
    assert pool.metrics()["deepinfer_vision_failures_total"] == failures + 1


def test_without_the_pool_images_get_503_and_text_is_still_served(model):
    pool = VisionPool(MODEL_DIR)
    s = Server(MODEL_DIR, "--served-model-name", MODEL, "--vision-encoder", pool.url)
    try:
        pool.stop()
        oai = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=120)
        with pytest.raises(openai.APIStatusError) as e:
            oai.chat.completions.create(model=MODEL, max_tokens=2, messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image_b64('rgba.png')}"}}]}])
        assert e.value.status_code == 503
        assert "vision encoder" in str(e.value)
        r = oai.chat.completions.create(model=MODEL, max_tokens=2, temperature=0,
                                        messages=[{"role": "user", "content": "hello"}])
        assert r.choices[0].finish_reason in ("length", "stop")
    finally:
        s.stop()


def run(*args):
    return subprocess.run([str(BINARY), "serve", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_wrong_uses_are_refused_with_one_line(model, pool):
    r = run("--role", "vision", "--model", model, "--port", free_port())
    assert r.returncode != 0 and "not a multimodal model" in r.stderr
    r = run("--model", model, "--vision-encoder", pool.url, "--port", free_port())
    assert r.returncode != 0 and "text-only model" in r.stderr
    r = run("--role", "prefill", "--model", MODEL_DIR, "--vision-encoder", pool.url)
    assert r.returncode != 0 and "--vision-encoder is for --role all or entrypoint" in r.stderr
    r = run("--model", MODEL_DIR, "--vision-encoder", f"http://127.0.0.1:{free_port()}", "--port", free_port())
    assert r.returncode != 0 and "no encoder answered" in r.stderr


def test_images_through_the_disaggregated_deployment_equal_transformers(pool):
    c = Cluster(MODEL_DIR, prefill=1, decode=1, extra=("--vision-encoder", pool.url))
    try:
        oai = openai.OpenAI(base_url=c.url + "/v1", api_key="none", max_retries=0, timeout=120)
        for case in EXPECTED["cases"]:
            for _ in range(2):  # the second time the prefix (image blocks included) is cached
                r = oai.chat.completions.create(model=PD_MODEL_NAME, messages=openai_messages(case), max_tokens=8,
                                                temperature=0, logprobs=True)
                got = [bytes(t.bytes) for t in r.choices[0].logprobs.content]
                assert got == [bytes(b) for b in case["greedy_bytes"]], case["name"]
        prefill_port = c.children["prefill-0"][1]
        m = c.metrics(f"http://127.0.0.1:{prefill_port}")
        assert m['deepinfer_pd_kv_blocks_total{role="prefill"}'] > 0  # image blocks moved too
    finally:
        c.stop()
