"""SIGTERM stops `deepinfer serve` within a couple of seconds, exit status 0, whatever its
connections are doing: a 401 whose body arrived after its headers (as the SDKs send it; the
server used to leave it unread and wait a minute on the connection), idle keep-alive
connections, requests half sent, a stream whose client stopped reading (a write waiting for
room), and requests mid-generation, which still get their ends (the streams' final events, the
JSON reply with what was generated)."""
import json
import signal
import socket
import subprocess
import threading
import time

import anthropic
import pytest

from server_util import Server

MODEL = "smollm2-135m-instruct"
KEY = "secret-key"
LIMIT_S = 4  # the stop gives responses in progress 1 s, then closes every connection
LONG = {"model": MODEL, "max_tokens": 3000, "ignore_eos": True, "temperature": 1.0,
        "messages": [{"role": "user", "content": "Write a very long story."}]}


def start(model):
    return Server(model, "--served-model-name", MODEL, "--api-key", KEY)


def connect(server, small_window=False):
    s = socket.socket()
    if small_window:  # before connect: a small receive window and segments, so that the
        # server's send buffer (sized from them) fills with a few tens of kB
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    s.connect(("127.0.0.1", server.port))
    s.settimeout(10)
    return s


def send_request(sock, path, body, key=KEY, split=False):
    """POSTs JSON as an SDK would; with `split`, the body goes out after a pause."""
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-api-key: {key}\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode()
    if split:
        sock.sendall(head)
        time.sleep(0.2)
        sock.sendall(data)
    else:
        sock.sendall(head + data)


def read_response(sock):
    """Reads one response (Content-Length or chunked); returns (status, body bytes)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, rest = buf.split(b"\r\n\r\n", 1)
    lengths = [h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")]
    if lengths:
        while len(rest) < int(lengths[0]):
            rest += sock.recv(65536)
        return int(head.split()[1]), rest
    body = b""
    while True:  # chunked
        while b"\r\n" not in rest:
            rest += sock.recv(65536)
        size, rest = rest.split(b"\r\n", 1)
        while len(rest) < int(size, 16) + 2:
            rest += sock.recv(65536)
        if int(size, 16) == 0:
            return int(head.split()[1]), body
        body += rest[:int(size, 16)]
        rest = rest[int(size, 16) + 2:]


def dechunk(data):
    """The body of a whole chunked transfer."""
    body = b""
    while True:
        size, _, data = data.partition(b"\r\n")
        if int(size, 16) == 0:
            return body
        body += data[:int(size, 16)]
        data = data[int(size, 16) + 2:]


def read_until_closed(sock):
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            return data
        if not chunk:
            return data
        data += chunk


def stop_with_sigterm(server):
    """Sends SIGTERM and checks that the process exits 0 within LIMIT_S."""
    start_t = time.time()
    server.proc.send_signal(signal.SIGTERM)
    try:
        server.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
        pytest.fail(f"the server did not stop within 30 s of SIGTERM:\n{server.output()[-2000:]}")
    took = time.time() - start_t
    assert server.proc.returncode == 0, server.output()[-2000:]
    assert took < LIMIT_S, f"SIGTERM took {took:.1f} s"


def send_queue(server, sock):
    """Bytes the server's end of `sock`'s connection holds unsent (Linux /proc/net/tcp)."""
    client_port = sock.getsockname()[1]
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        local, remote = int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16)
        if (local, remote) == (server.port, client_port):
            return int(f[4].split(":")[0], 16)
    return 0


def wait_blocked(server, sock):
    """Waits until the server's writes to `sock` block: its send queue full, so unchanged for a
    second while tokens keep coming."""
    deadline = time.time() + 30
    seen = []
    while time.time() < deadline:
        seen = (seen + [send_queue(server, sock)])[-5:]
        if len(seen) == 5 and seen[0] > 0 and len(set(seen)) == 1:
            return
        time.sleep(0.25)
    pytest.fail(f"the server's send queue never filled: {seen}")


def wait_running(server, n):
    deadline = time.time() + 60
    while time.time() < deadline:
        if server.metrics()["deepinfer_num_requests_running"] >= n:
            return
        time.sleep(0.05)
    pytest.fail(f"{n} requests never ran")


def test_stop_after_wrong_key_requests_with_bodies(model):
    server = start(model)
    try:
        sdk = anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0, timeout=30)
        with pytest.raises(anthropic.AuthenticationError):
            sdk.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "x"}])
        # The same by hand: the body after the headers, and the connection kept.
        sock = connect(server)
        send_request(sock, "/v1/chat/completions", {"model": MODEL, "messages": []}, key="wrong", split=True)
        assert read_response(sock)[0] == 401
        stop_with_sigterm(server)
    finally:
        server.stop()


def test_request_after_a_401_on_the_same_connection(model):
    server = start(model)
    try:
        sock = connect(server)
        send_request(sock, "/v1/messages", {"model": MODEL, "max_tokens": 2, "messages": []}, key="", split=True)
        assert read_response(sock)[0] == 401
        # Read as a request, not as the rest of the 401's unread body (then a 400).
        send_request(sock, "/v1/messages", {"model": MODEL, "max_tokens": 2,
                                            "messages": [{"role": "user", "content": "Hi"}]})
        status, body = read_response(sock)
        assert status == 200, body
        assert json.loads(body)["type"] == "message"
    finally:
        server.stop()


def test_stop_with_idle_and_half_sent_connections(model):
    server = start(model)
    try:
        silent = connect(server)  # connected, never sends
        half = connect(server)
        half.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Len")
        short_body = connect(server)
        short_body.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: " + KEY.encode() +
                           b"\r\nContent-Length: 100\r\n\r\n{\"model\"")
        idle = connect(server)  # a finished request on a kept connection, as an SDK's pool holds
        send_request(idle, "/v1/messages", {"model": MODEL, "max_tokens": 1,
                                            "messages": [{"role": "user", "content": "Hi"}]})
        assert read_response(idle)[0] == 200
        stop_with_sigterm(server)
        for s in (silent, half, short_body, idle):
            assert read_until_closed(s) == b""  # closed by the server, nothing sent
    finally:
        server.stop()


def test_stop_with_a_stream_nobody_reads(model):
    server = start(model)
    try:
        stalled = connect(server, small_window=True)
        # Large events (20 top logprobs a token), so the buffers fill within a second.
        send_request(stalled, "/v1/chat/completions", {**LONG, "stream": True, "logprobs": True,
                                                       "top_logprobs": 20})
        assert b"200 OK" in stalled.recv(100)
        wait_blocked(server, stalled)  # a server thread now waits in a write (up to 60 s)
        stop_with_sigterm(server)
        stalled.close()
    finally:
        server.stop()


def test_stop_mid_generation_ends_replies(model):
    server = start(model)
    try:
        sse = connect(server)
        send_request(sse, "/v1/messages", {**LONG, "stream": True})
        openai_sse = connect(server)
        send_request(openai_sse, "/v1/chat/completions", {**LONG, "stream": True})
        plain = connect(server)
        send_request(plain, "/v1/chat/completions", LONG)
        responses = connect(server)
        send_request(responses, "/v1/responses", {"model": MODEL, "max_output_tokens": 3000,
                                                  "input": "Write a very long story."})
        got = {}
        readers = [threading.Thread(target=lambda k=k, s=s: got.__setitem__(k, read_until_closed(s)))
                   for k, s in (("sse", sse), ("openai_sse", openai_sse), ("plain", plain),
                                ("responses", responses))]
        for t in readers:
            t.start()
        wait_running(server, 4)
        time.sleep(0.5)
        stop_with_sigterm(server)
        for t in readers:
            t.join(10)
    finally:
        server.stop()
    # Each reply ended as it does when a request is aborted: with what was generated and the
    # API's final events.
    assert b"event: message_stop" in got["sse"] and b"content_block_delta" in got["sse"], got["sse"][-500:]
    assert b"data: [DONE]" in got["openai_sse"], got["openai_sse"][-500:]
    head, _, chunked = got["plain"].partition(b"\r\n\r\n")
    assert b"200 OK" in head, head
    reply = json.loads(dechunk(chunked))
    assert reply["choices"][0]["message"]["content"], reply
    # Cut short, not finished: the reason says so (a partial answer is never reported as "stop").
    assert reply["choices"][0]["finish_reason"] == "abort", reply
    assert b'"stop_reason":"abort"' in got["sse"], got["sse"][-500:]
    assert b'"finish_reason":"abort"' in got["openai_sse"], got["openai_sse"][-500:]
    head, _, chunked = got["responses"].partition(b"\r\n\r\n")
    assert b"200 OK" in head, head
    response = json.loads(dechunk(chunked))
    assert response["status"] == "incomplete", response
    assert response["incomplete_details"] == {"reason": "server_shutdown"}, response
    # Its usage counts what was generated before the stop (the engine's final output never
    # comes for a request the stop ends).
    assert reply["usage"]["prompt_tokens"] > 0 and reply["usage"]["completion_tokens"] > 0, reply
