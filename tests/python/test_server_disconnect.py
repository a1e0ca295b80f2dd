"""A client that leaves (timeout, closed tab) must not keep its sequence generating: whether the
reply streams or not and whether it asked for gzip, the server aborts the sequence, frees its KV
and counts it in deepinfer_aborted_requests_total within a couple of seconds."""
import json
import socket
import time

import openai
import pytest

from server_util import Server

MODEL = "smollm2-135m-instruct"
LONG = {"model": MODEL, "max_tokens": 3000, "ignore_eos": True, "temperature": 1.0,
        "messages": [{"role": "user", "content": "Write a very long story."}]}


@pytest.fixture(scope="module")
def server(model):
    s = Server(model, "--served-model-name", MODEL)
    yield s
    s.stop()


def idle(m):
    return (m["deepinfer_num_requests_running"] == 0 and m["deepinfer_num_requests_in_flight"] == 0
            and m["deepinfer_kv_cache_usage_ratio"] == 0)


def wait_freed(server, limit):
    """Seconds until nothing runs and no KV block is held (or None past `limit`)."""
    start = time.time()
    while time.time() - start < limit:
        if idle(server.metrics()):
            return time.time() - start
        time.sleep(0.05)
    return None


def send_and_leave(server, path, body, gzip, wait=2.5):
    """Sends a request on a raw socket as an SDK would, reads for `wait` s, then closes."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n")
    if gzip:
        head += "Accept-Encoding: gzip, deflate\r\n"
    s.sendall(head.encode() + b"\r\n" + data)
    s.settimeout(0.2)
    end = time.time() + wait
    got = b""
    while time.time() < end:
        try:
            got += s.recv(65536)
        except socket.timeout:
            pass
    s.close()
    return got


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_disconnect_frees_the_sequence(server, path, gzip, stream):
    assert wait_freed(server, 30) is not None
    before = server.metrics()["deepinfer_aborted_requests_total"]
    # 2.5 s: after the first blank of a JSON reply went out (with gzip, that write carries the
    # gzip header and later blanks stay in the compressor)
    got = send_and_leave(server, path, {**LONG, "stream": stream}, gzip)
    assert b"200" in got.split(b"\r\n")[0]  # it was generating when the client left
    took = wait_freed(server, 4)
    print(f"{path} stream={stream} gzip={gzip}: freed {took} s after the disconnect")
    assert took is not None, f"still generating 4 s after the client left: {server.metrics()}"
    assert server.metrics()["deepinfer_aborted_requests_total"] == before + 1


def test_sdk_timeout_with_default_gzip_aborts(server):
    """The official SDK (Accept-Encoding: gzip) giving up after 2.5 s, no retries."""
    assert wait_freed(server, 30) is not None
    before = server.metrics()["deepinfer_aborted_requests_total"]
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", timeout=2.5, max_retries=0)
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model=MODEL, messages=LONG["messages"], max_tokens=3000,
                                       extra_body={"ignore_eos": True})
    assert wait_freed(server, 4) is not None
    assert server.metrics()["deepinfer_aborted_requests_total"] == before + 1
