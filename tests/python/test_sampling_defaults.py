"""Each interface gives the default temperature docs/sampling.md documents: HTTP 1.0 (OpenAI and
Anthropic routes), `deepinfer generate` 0 (greedy), `deepinfer chat` 0.7 with top_p 0.9. (Python
SamplingParams: tests/python/test_python_api.py.) Each check compares a request without the
setting to one that spells the documented value out, and also shows that the value matters."""
import json

import pytest

from conftest import run
from server_util import Server, post_json

MODEL_NAME = "smollm2-135m-instruct"
SEEDS = (3, 11, 29)


@pytest.fixture(scope="module")
def server(model):
    s = Server(model, "--served-model-name", MODEL_NAME)
    yield s
    s.stop()


def complete(server, path, **fields):
    body = {"model": MODEL_NAME, "max_tokens": 12, "ignore_eos": True, **fields}
    if path == "/v1/completions":
        body["prompt"] = "My favourite animal is"
    else:
        body["messages"] = [{"role": "user", "content": "Name an animal."}]
    status, reply = post_json(server, path, body)
    assert status == 200, reply
    if path == "/v1/messages":
        return "".join(b["text"] for b in reply["content"] if b["type"] == "text")
    choice = reply["choices"][0]
    return choice["text"] if path == "/v1/completions" else choice["message"]["content"]


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions", "/v1/messages"])
def test_http_default_temperature_is_one(server, path):
    differs_from_greedy = False
    for seed in SEEDS:
        default = complete(server, path, seed=seed)
        assert default == complete(server, path, seed=seed), "seeded requests repeat"
        assert default == complete(server, path, seed=seed, temperature=1.0)
        differs_from_greedy |= default != complete(server, path, seed=seed, temperature=0)
    assert differs_from_greedy, "the default samples (it is not greedy)"


def generate(model, *flags):
    r = run("generate", "--model", model, "--prompt", "My favourite animal is", "--max-tokens", "12",
            "--ignore-eos", "--json", *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["token_ids"]


def test_generate_is_greedy_by_default(model):
    default = generate(model)
    assert default == generate(model, "--temperature", "0")
    assert any(default != generate(model, "--temperature", "1", "--seed", str(s)) for s in SEEDS)
    help_text = run("generate", "--help").stdout
    assert "Greedy by default" in help_text and "docs/sampling.md" in help_text


def chat(model, *flags):
    r = run("chat", "--model", model, "--max-tokens", "16", "--ignore-eos", *flags,
            input="Name an animal.\n/exit\n")
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_chat_samples_at_0_7_by_default(model):
    for seed in SEEDS[:2]:
        default = chat(model, "--seed", str(seed))
        assert default == chat(model, "--seed", str(seed), "--temperature", "0.7", "--top-p", "0.9")
    greedy = chat(model, "--temperature", "0")
    assert any(chat(model, "--seed", str(s)) != greedy for s in SEEDS)
    assert "--temperature 0.7" in run("chat", "--help").stdout
