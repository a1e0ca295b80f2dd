"""Prefill/decode disaggregation end to end (issue 25): `deepinfer cluster` starts 2 prefill and
2 decode engines behind an entrypoint on loopback; the same requests through the official
`openai` and `anthropic` SDKs must give the all-in-one server's tokens (and, in batch-invariant
mode, its logprobs bit for bit). Then the faults: a prefill engine killed with SIGKILL (its
prompts go to the other; a prefix it computed is still found in the shared KV store), a decode
engine killed mid-stream (that stream ends with an error event, the others and new requests are
unaffected)."""
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import time

import pytest

from pd_util import ENGINE_FLAGS, MODEL_NAME, NAME_FLAGS, Cluster
from server_util import Server

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


@pytest.fixture(scope="module")
def all_in_one(model):
    s = Server(model, *ENGINE_FLAGS, *NAME_FLAGS)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def cluster(model):
    c = Cluster(model)
    yield c
    c.stop()


def clients(url):
    return (openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300),
            anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=300))


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
          "required": ["city", "population"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TOPICS = ["the sea", "a library", "winter", "a robot", "trains", "coffee", "mountains", "a cat", "rain", "the moon"]


def one_request(url, i):
    """Request i of the mixed set; returns a JSON-able summary of what came back."""
    oa, an = clients(url)
    topic = TOPICS[i % len(TOPICS)]
    # Prompts of several lengths: some span several KV blocks (the transfer's work), some fewer
    # than one (nothing to transfer).
    filler = " ".join(f"Fact {k}: {topic} matters." for k in range(i % 7 * 6))
    kind = i % 7
    if kind == 0:
        r = oa.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": f"{filler} Write about {topic}."}],
                                       max_tokens=16, temperature=0, logprobs=True, top_logprobs=3)
        c = r.choices[0]
        return {"text": c.message.content, "finish": c.finish_reason,
                "logprobs": [(t.token, t.logprob, [(x.token, x.logprob) for x in t.top_logprobs]) for t in c.logprobs.content],
                "usage": [r.usage.prompt_tokens, r.usage.completion_tokens]}
    if kind == 1:
        chunks = oa.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": f"{filler} A poem on {topic}."}],
                                            max_tokens=20, temperature=0, stream=True)
        return {"text": "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)}
    if kind == 2:
        r = oa.completions.create(model=MODEL_NAME, prompt=f"{filler} The story of {topic} begins", max_tokens=16,
                                  temperature=0.8, seed=1000 + i)
        return {"text": r.choices[0].text, "finish": r.choices[0].finish_reason}
    if kind == 3:
        r = oa.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": f"A city near {topic} as JSON."}],
                                       max_tokens=40, temperature=0,
                                       response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA, "strict": True}})
        return {"text": r.choices[0].message.content, "finish": r.choices[0].finish_reason}
    if kind == 4:
        r = oa.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": f"Weather where {topic} is?"}],
                                       tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                       max_tokens=32, temperature=0)
        c = r.choices[0]
        return {"finish": c.finish_reason, "calls": [(t.function.name, t.function.arguments) for t in c.message.tool_calls or []]}
    if kind == 5:
        m = an.messages.create(model=MODEL_NAME, max_tokens=16, extra_body={"temperature": 0},
                               messages=[{"role": "user", "content": f"{filler} Tell me about {topic}."}])
        return {"text": "".join(b.text for b in m.content if b.type == "text"), "stop": m.stop_reason,
                # Cached prompt tokens depend on each engine's cache, so compare the total.
                "usage": [m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0), m.usage.output_tokens]}
    with an.messages.stream(model=MODEL_NAME, max_tokens=16, extra_body={"temperature": 0},
                            messages=[{"role": "user", "content": f"{filler} Describe {topic}."}]) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    return {"text": text, "stop": final.stop_reason}


def run_set(url, n):
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda i: one_request(url, i), range(n)))


def test_outputs_equal_the_all_in_one_server(all_in_one, cluster):
    # Request i is kind i % 7 (each kind with its own prompt length) on topic i % 10, so the
    # first 70 are every distinct request once; the 14 after them repeat prompts already served
    # (prefix-cache hits in both deployments; the sampled kind draws new seeds). The 200 this
    # used to send only repeated these more often.
    n = 84
    # Both sets at once: batch-invariant mode makes a request's tokens and logprobs independent
    # of what else runs, and the all-in-one server alone (--threads 1) would leave a core idle.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        want, got = pool.map(lambda url: run_set(url, n), (all_in_one.url, cluster.url))
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, f"request {i} (kind {i % 7}) differs:\nall-in-one {json.dumps(w)}\ncluster    {json.dumps(g)}"
    m = cluster.metrics()
    moved = sum(v for k, v in cluster.metrics(f"http://127.0.0.1:{cluster.children['decode-0'][1]}").items()
                if k.startswith("deepinfer_pd_kv_blocks_total"))
    moved += sum(v for k, v in cluster.metrics(f"http://127.0.0.1:{cluster.children['decode-1'][1]}").items()
                 if k.startswith("deepinfer_pd_kv_blocks_total"))
    assert moved > 0, "no KV block went from a prefill engine to a decode engine"
    for name in ("prefill-0", "prefill-1", "decode-0", "decode-1"):
        pool = name.split("-")[0]
        assert cluster.engine_counter(pool, name, "requests_total") > 0, f"{name} got no request: {m}"


def test_request_id_is_carried_across_roles(cluster):
    oa, _ = clients(cluster.url)
    oa.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "Hi " * 40}], max_tokens=2, temperature=0)
    prefill_logs = cluster.log("prefill-0") + cluster.log("prefill-1")
    decode_logs = cluster.log("decode-0") + cluster.log("decode-1")
    ids = set(re.findall(r"prefill (req-[0-9a-f]{16}):", prefill_logs))
    assert ids, prefill_logs[-2000:]
    assert ids & set(re.findall(r"decode (req-[0-9a-f]{16}):", decode_logs)), decode_logs[-2000:]


def long_prompt(tag):
    return f"[{tag}] " + " ".join(f"Line {k}: the committee reviewed item {k} and moved on." for k in range(60))


def test_repeated_prompt_is_served_from_cache_even_after_its_prefill_engine_dies(cluster):
    oa, _ = clients(cluster.url)
    prompt = long_prompt("cache")
    before = {n: cluster.engine_counter("prefill", n, "requests_total") for n in ("prefill-0", "prefill-1")}
    first = oa.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=4, temperature=0)
    assert first.usage.prompt_tokens > 400
    served_by = [n for n in before if cluster.engine_counter("prefill", n, "requests_total") > before[n]]
    assert len(served_by) == 1
    second = oa.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=4, temperature=0)
    assert second.choices[0].text == first.choices[0].text
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached >= first.usage.prompt_tokens - 64, second.usage
    # SIGKILL the engine that holds it in memory: the other prefill engine reads the prefix from
    # the shared KV store (written through by the first), and the request is still answered.
    os.kill(cluster.children[served_by[0]][0], signal.SIGKILL)
    time.sleep(0.5)
    third = oa.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=4, temperature=0)
    assert third.choices[0].text == first.choices[0].text
    assert third.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 64, third.usage
    # Under load with one prefill engine dead: every request is answered.
    results = run_set(cluster.url, 14)
    assert all(r for r in results)


def test_a_decode_engine_killed_mid_stream_ends_only_its_streams(cluster):
    oa, _ = clients(cluster.url)
    # A long stream; find the decode engine serving it and kill it.
    stream = oa.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "Count from 1 to 1000."}],
                                        max_tokens=2000, temperature=0, stream=True,
                                        logit_bias={"0": -100, "2": -100})  # no end of text
    it = iter(stream)
    next(it)
    victim = None
    for _ in range(50):
        for name in ("decode-0", "decode-1"):
            if cluster.engine_counter("decode", name, "in_flight") > 0:
                victim = name
        if victim:
            break
        time.sleep(0.1)
    assert victim, cluster.metrics()
    os.kill(cluster.children[victim][0], signal.SIGKILL)
    with pytest.raises(Exception) as info:
        for _ in it:
            pass
    assert "decode engine" in str(info.value) or "stopped" in str(info.value), str(info.value)
    # New requests go to the live decode engine.
    r = oa.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "Say hi."}], max_tokens=4, temperature=0)
    assert r.choices[0].message.content is not None
    assert cluster.metrics()["deepinfer_pd_decode_failures_total"] >= 1


def test_entrypoint_refuses_what_it_cannot_serve(model, binary):
    r = subprocess.run([str(binary), "serve", "--role", "entrypoint", "--model", str(model)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--prefill" in r.stderr
    r = subprocess.run([str(binary), "serve", "--role", "entrypoint", "--model", str(model), "--prefill", "ftp://x:1",
                        "--decode", "http://127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "only http://" in r.stderr
    r = subprocess.run([str(binary), "serve", "--role", "decode", "--model", str(model), "--prefill", "http://127.0.0.1:1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--role entrypoint" in r.stderr
