"""The server's HTTP surface under real clients: connection bursts, bytes that are not UTF-8,
validation as strict as the APIs we imitate, models.retrieve, CORS, 405, the Bearer scheme in
any case, and the Anthropic stream's usage."""
import concurrent.futures
import http.client
import json
import shutil
import socket
import subprocess
import threading

import anthropic
import openai
import pytest

from server_util import Server, post_json

MODEL = "smollm2-135m-instruct"
KEY = "k1"
ORIGIN = "http://app.example"


@pytest.fixture(scope="module")
def server(model):
    s = Server(model, "--served-model-name", MODEL, "--api-key", KEY, "--allowed-origins", ORIGIN + ", http://other.example")
    yield s
    s.stop()


def request(server, method, path, body=None, headers=None):
    """(status, headers dict with lower-case names, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    r = conn.getresponse()
    out = (r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    conn.close()
    return out


AUTH = {"Authorization": "Bearer " + KEY}
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}


def listen_backlog(port):
    """The listening socket's accept-queue limit (ss's Send-Q), or None without ss."""
    if not shutil.which("ss"):
        return None
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout.split()
    return int(out[2])


def test_listen_backlog_is_deep(server):
    backlog = listen_backlog(server.port)
    if backlog is None:
        pytest.skip("ss (iproute2) is not installed")
    assert backlog >= min(1024, int(open("/proc/sys/net/core/somaxconn").read()))


def test_burst_of_256_connections_none_refused(server):
    def one(_):
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
                return data.startswith(b"HTTP/1.1 200")
        except OSError:
            return False
    for _ in range(3):
        barrier = threading.Barrier(256)

        def at_once(i):
            barrier.wait()
            return one(i)
        with concurrent.futures.ThreadPoolExecutor(256) as pool:
            ok = list(pool.map(at_once, range(256)))
        print(f"burst: {ok.count(False)} of 256 connections refused or reset")
        assert ok.count(False) == 0, f"{ok.count(False)} of 256 connections refused or reset"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
                                  "/v1/messages/count_tokens"])
def test_invalid_utf8_is_a_400_naming_the_offset(server, path):
    raw = b'{"model": "' + MODEL.encode() + b'", "messages": [{"role": "user", "content": "ab\xff\xfe"}]}'
    status, _, body = request(server, "POST", path, raw, AUTH)
    assert status == 400, body
    err = json.loads(body)["error"]
    assert err["type"] == "invalid_request_error"
    offset = raw.index(b"\xff")
    assert "UTF-8" in err["message"] and f"offset {offset}" in err["message"], err


def test_truncated_utf8_sequence_at_the_end_is_named(server):
    raw = b'{"model": "' + MODEL.encode() + b'", "prompt": "caf\xc3'
    status, _, body = request(server, "POST", "/v1/completions", raw, AUTH)
    assert status == 400 and f"offset {len(raw) - 1}" in json.loads(body)["error"]["message"]


TOOL_CALL = {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}


@pytest.mark.parametrize("body,param", [
    ({**CHAT, "messages": [{"role": "user", "content": "x"}, TOOL_CALL, {"role": "tool", "content": "r"}]},
     "messages[2].tool_call_id"),
    ({**CHAT, "messages": [{"role": "user", "content": "x"}, TOOL_CALL,
                           {"role": "tool", "tool_call_id": "call_9", "content": "r"}]},
     "messages[2].tool_call_id"),
    ({**CHAT, "messages": [{"role": "tool", "tool_call_id": "call_1", "content": "r"}]}, "messages[0].tool_call_id"),
    ({**CHAT, "max_tokens": 0}, "max_tokens"),
    ({**CHAT, "max_completion_tokens": 0}, "max_completion_tokens"),
    ({k: v for k, v in CHAT.items() if k != "model"}, "model"),
])
def test_chat_validation_follows_openai(server, body, param):
    status, reply = post_json(server, "/v1/chat/completions", body, key=KEY, timeout=60)
    assert status == 400, reply
    assert reply["error"]["param"] == param, reply


def test_answered_tool_call_is_accepted(server):
    body = {**CHAT, "messages": [{"role": "user", "content": "x"}, TOOL_CALL,
                                 {"role": "tool", "tool_call_id": "call_1", "content": "r"}]}
    assert post_json(server, "/v1/chat/completions", body, key=KEY, timeout=60)[0] == 200


@pytest.mark.parametrize("path,body", [
    ("/v1/completions", {"prompt": "Hi", "max_tokens": 2}),
    ("/v1/completions", {"model": MODEL, "prompt": "Hi", "max_tokens": 0}),
    ("/v1/responses", {"input": "Hi"}),
    ("/v1/messages", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}),
    ("/v1/messages", {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 0}),
    ("/v1/messages", {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                      "temperature": 1.5}),
    ("/v1/messages/count_tokens", {"messages": [{"role": "user", "content": "Hi"}]}),
])
def test_other_routes_refuse_missing_model_zero_tokens_and_hot_anthropic(server, path, body):
    status, reply = post_json(server, path, body, key=KEY, timeout=60)
    assert status == 400, reply


def test_anthropic_tool_result_must_answer_a_tool_use(server):
    client = anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0)
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]}
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=MODEL, max_tokens=2, tools=tools, messages=[
            {"role": "user", "content": "x"}, use,
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "r"}]}])
    assert "tool_use_id" in str(e.value)
    ok = client.messages.create(model=MODEL, max_tokens=2, tools=tools, messages=[
        {"role": "user", "content": "x"}, use,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}]}])
    assert ok.usage.output_tokens >= 1


def test_echo_with_logprobs_gives_the_prompt_logprobs(server):
    # Once refused with 400; test_server_openai.py checks the numbers.
    status, reply = post_json(server, "/v1/completions", {"model": MODEL, "prompt": "Hi there", "max_tokens": 2,
                                                          "echo": True, "logprobs": 1}, key=KEY, timeout=60)
    assert status == 200, reply
    lp = reply["choices"][0]["logprobs"]
    n_prompt = reply["usage"]["prompt_tokens"]
    assert len(lp["tokens"]) == n_prompt + reply["usage"]["completion_tokens"]
    assert lp["token_logprobs"][0] is None and all(x is not None for x in lp["token_logprobs"][1:])


def test_models_retrieve_with_both_sdks(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("gpt-nothing")
    assert "gpt-nothing" in str(e.value)
    status, _, body = request(server, "GET", "/v1/models/gpt-nothing", headers=AUTH)
    assert status == 404 and json.loads(body)["error"]["type"] == "not_found_error"
    a = anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0)
    assert a.models.retrieve(MODEL).id == MODEL


def test_lower_case_bearer_scheme_is_accepted(server):
    status, _, _ = request(server, "GET", "/v1/models", headers={"Authorization": "bearer " + KEY})
    assert status == 200
    status, _, _ = request(server, "GET", "/v1/models", headers={"Authorization": "BEARER " + KEY})
    assert status == 200
    status, _, _ = request(server, "GET", "/v1/models", headers={"Authorization": "Basic " + KEY})
    assert status == 401


@pytest.mark.parametrize("method,path,allow", [
    ("GET", "/v1/chat/completions", "POST"),
    ("DELETE", "/v1/models", "GET"),
    ("POST", "/health", "GET"),
    ("PUT", "/v1/messages", "POST"),
])
def test_wrong_method_is_405_with_allow(server, method, path, allow):
    status, headers, body = request(server, method, path, b"{}" if method != "GET" else None, AUTH)
    assert status == 405, body
    assert allow in headers["allow"]
    assert "not allowed" in body.decode()


def test_unknown_path_is_still_404(server):
    assert request(server, "GET", "/v1/nothing", headers=AUTH)[0] == 404


def test_cors_preflight_and_headers(server):
    pre = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type"}
    status, headers, _ = request(server, "OPTIONS", "/v1/chat/completions", headers=pre)  # no key: preflights have none
    assert status == 204
    assert headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in headers["access-control-allow-methods"]
    assert "authorization" in headers["access-control-allow-headers"].lower()
    status, headers, _ = request(server, "POST", "/v1/chat/completions", CHAT, {**AUTH, "Origin": ORIGIN})
    assert status == 200 and headers["access-control-allow-origin"] == ORIGIN
    # An origin not on the list gets no CORS headers, and its preflight is refused.
    status, headers, _ = request(server, "GET", "/v1/models", headers={**AUTH, "Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in headers
    status, headers, _ = request(server, "OPTIONS", "/v1/models", headers={**pre, "Origin": "http://evil.example"})
    assert status == 403 and "access-control-allow-origin" not in headers


def test_cors_is_off_by_default(model):
    s = Server(model, "--served-model-name", MODEL)
    try:
        status, headers, _ = request(s, "GET", "/v1/models", headers={"Origin": ORIGIN})
        assert status == 200 and "access-control-allow-origin" not in headers
        status, headers, _ = request(s, "OPTIONS", "/v1/models", headers={"Origin": ORIGIN,
                                                                           "Access-Control-Request-Method": "GET"})
        assert status == 403 and "access-control-allow-origin" not in headers
    finally:
        s.stop()


def test_anthropic_stream_start_usage_agrees_with_delta(server):
    client = anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0)
    msgs = [{"role": "user", "content": "Tell me a short fact about the sea, in one line please. " * 4}]
    client.messages.create(model=MODEL, max_tokens=2, messages=msgs)  # fills the prefix cache
    start = delta = None
    with client.messages.stream(model=MODEL, max_tokens=4, messages=msgs) as stream:
        for event in stream:
            if event.type == "message_start":
                start = event.message.usage
            elif event.type == "message_delta":
                delta = event.usage
    assert delta.cache_read_input_tokens > 0  # the test needs a cache hit to mean something
    assert start.input_tokens == delta.input_tokens
    assert start.cache_read_input_tokens == delta.cache_read_input_tokens
