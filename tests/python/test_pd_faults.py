"""Prefill/decode disaggregation, the store and the faults a small deployment must survive
(issue 25), on `deepinfer cluster --prefill 1 --decode 1` with a shared KV store:
- the entrypoint's own lookup of the store: a prompt whose blocks are all stored goes straight
  to the decode engine (no prefill), with the same tokens and the prefix reported as cached;
- the store dropped (its directory deleted) while serving: requests are still answered, computed;
- the only decode engine killed: /health and new requests answer 503 with a clear message (no
  hang); restarted on its port, it rejoins and serves again."""
import json
import os
import shutil
import time
import urllib.error
import urllib.request

import pytest

from pd_util import MODEL_NAME, Cluster

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def small(model):
    c = Cluster(model, prefill=1, decode=1)
    yield c
    c.stop()


def client(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=120)


def prompt(tag):
    return f"[{tag}] " + " ".join(f"Entry {k}: the auditor checked record {k} and signed it." for k in range(50))


def complete(url, text):
    return client(url).completions.create(model=MODEL_NAME, prompt=text, max_tokens=6, temperature=0)


def test_a_stored_prompt_skips_the_prefill_pool(small):
    first = complete(small.url, prompt("store"))
    assert first.usage.prompt_tokens > 400
    before = small.metrics()
    # The prefill engine writes the blocks to the store in the background: ask until the
    # entrypoint's lookup finds them all.
    deadline = time.time() + 30
    while True:
        again = complete(small.url, prompt("store"))
        m = small.metrics()
        if m["deepinfer_pd_prefill_skipped_total"] > before["deepinfer_pd_prefill_skipped_total"]:
            break
        assert time.time() < deadline, f"the entrypoint never found the prompt in the store: {m}"
        time.sleep(0.5)
    assert again.choices[0].text == first.choices[0].text
    assert again.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 16, again.usage
    assert m["deepinfer_pd_store_hit_tokens_total"] >= first.usage.prompt_tokens - 16
    prefill_port = small.children["prefill-0"][1]
    key = f'deepinfer_pd_engine_requests_total{{pool="prefill",engine="127.0.0.1:{prefill_port}"}}'
    assert m[key] == before[key], "the stored prompt still went through the prefill engine"
    # A new prompt still goes through prefill, and the histograms of both pools fill.
    complete(small.url, prompt("fresh"))
    m = small.metrics()
    assert m[key] == before[key] + 1
    assert m["deepinfer_pd_prefill_seconds_count"] >= 1
    assert m["deepinfer_pd_decode_first_token_seconds_count"] >= 3
    assert m["deepinfer_pd_decode_time_per_output_token_seconds_count"] >= 3
    # Each engine's /metrics has its own pool's latency.
    decode = small.metrics(f"http://127.0.0.1:{small.children['decode-0'][1]}")
    assert decode["deepinfer_time_to_first_token_seconds_count"] >= 3, decode
    prefill = small.metrics(f"http://127.0.0.1:{prefill_port}")
    assert prefill["deepinfer_time_to_first_token_seconds_count"] >= 2, prefill


def test_requests_are_answered_after_the_store_is_dropped(small):
    want = complete(small.url, prompt("drop")).choices[0].text
    shutil.rmtree(small.store)
    for tag in ("drop", "after-drop-1", "after-drop-2"):
        r = complete(small.url, prompt(tag))
        assert r.choices[0].finish_reason == "length"
        if tag == "drop":
            assert r.choices[0].text == want
    assert small.health() == 200
    os.makedirs(small.store, exist_ok=True)


def post_chat(url):
    body = json.dumps({"model": MODEL_NAME, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4,
                       "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_with_every_decode_engine_down_503_then_a_restarted_one_rejoins(small):
    assert post_chat(small.url)[0] == 200
    argv = small.kill("decode-0")
    # Within a health check (2 s) the entrypoint knows; a request in that window may fail on the
    # dead engine (an error, not a hang); after it, every request is refused with 503.
    deadline = time.time() + 20
    while small.health() != 503:
        assert time.time() < deadline, "the entrypoint still reports healthy with its decode engine dead"
        time.sleep(0.3)
    status, body = post_chat(small.url)
    assert status == 503, body
    assert "decode" in json.dumps(body), body
    assert small.metrics()["deepinfer_pd_refused_total"] >= 1
    small.restart("decode-0", argv)
    deadline = time.time() + 120
    while small.health() != 200:
        assert time.time() < deadline, "the restarted decode engine did not rejoin"
        time.sleep(0.5)
    status, body = post_chat(small.url)
    assert status == 200, body
    port = small.children["decode-0"][1]
    assert small.metrics()[f'deepinfer_pd_engine_up{{pool="decode",engine="127.0.0.1:{port}"}}'] == 1
