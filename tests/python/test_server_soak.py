"""Soak: 64 clients send mixed traffic to every endpoint (streams and not, gzip and not) and
leave at random moments; afterwards every in-flight gauge is back to 0, no KV block is held,
and the server's memory is within 5% of where it stood after a warm-up of the same traffic.

Short by default (DEEPINFER_SOAK_SECONDS=10, under a minute in all); for a real soak run
    DEEPINFER_SOAK_SECONDS=600 python3 -m pytest -q -s tests/python/test_server_soak.py
"""
import concurrent.futures
import json
import os
import random
import socket
import threading
import time

import pytest

from server_util import Server

MODEL = "smollm2-135m-instruct"
CLIENTS = 64
SOAK_SECONDS = float(os.environ.get("DEEPINFER_SOAK_SECONDS", "10"))
GAUGES = ["deepinfer_num_requests_waiting", "deepinfer_num_requests_running", "deepinfer_num_requests_in_flight",
          "deepinfer_kv_cache_usage_ratio"]


@pytest.fixture(scope="module")
def server(model):
    # A small KV pool (0.1 GiB = 145 blocks of 16 tokens, room for 16 running sequences of this
    # traffic): the pool's memory becomes resident as blocks are first used (an anonymous map), so
    # the warm-up must reach every block for the RSS comparison to see only leaks; a 1 GiB pool
    # keeps growing through the soak (CI saw 307 -> 439 MB). Measured here: RSS +8-9 MB over the
    # soak with this pool, as with the zero-filled pool of the previous build (+8.7 MB at 0.05 GiB).
    s = Server(model, "--served-model-name", MODEL, "--max-num-seqs", "16", "--kv-cache-gb", "0.1")
    yield s
    s.stop()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def random_request(rng):
    """(method, path, body or None) over every endpoint."""
    msgs = [{"role": "user", "content": rng.choice(["Hi", "Tell me a story.", "What is 2+2?", "Name a color."])}]
    n = rng.randint(1, 48)
    stream = rng.random() < 0.5
    return rng.choice([
        ("POST", "/v1/chat/completions", {"model": MODEL, "messages": msgs, "max_tokens": n, "stream": stream,
                                          "temperature": 1.0, "seed": rng.randint(0, 9999)}),
        ("POST", "/v1/completions", {"model": MODEL, "prompt": "Once upon a time", "max_tokens": n, "stream": stream}),
        ("POST", "/v1/responses", {"model": MODEL, "input": msgs[0]["content"], "max_output_tokens": 16 + n,
                                   "stream": stream}),
        ("POST", "/v1/messages", {"model": MODEL, "messages": msgs, "max_tokens": n, "stream": stream}),
        ("POST", "/v1/messages/count_tokens", {"model": MODEL, "messages": msgs}),
        ("GET", "/v1/models", None),
        ("GET", "/health", None),
        ("GET", "/metrics", None),
        ("POST", "/v1/chat/completions", {"model": MODEL, "messages": "not a list"}),  # a 400
    ])


def one_exchange(port, rng):
    """Sends one request; reads all of the reply, or leaves at a random moment. Returns the status
    line's code, or None when it left before one arrived."""
    method, path, body = random_request(rng)
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(data)}\r\n"
    if body is not None:
        head += "Content-Type: application/json\r\n"
    if rng.random() < 0.5:
        head += "Accept-Encoding: gzip\r\n"
    leave_after = rng.uniform(0.05, 2.0) if rng.random() < 0.3 else None
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        s.sendall(head.encode() + b"\r\n" + data)
        start, got = time.time(), b""
        s.settimeout(0.1 if leave_after else 120)
        while True:
            if leave_after and time.time() - start > leave_after:
                break
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            got += chunk
    line = got.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) >= 2 else None


def run_traffic(port, seconds, seed):
    statuses, lock = [], threading.Lock()
    deadline = time.time() + seconds

    def client(i):
        rng = random.Random(seed * 1000 + i)
        while time.time() < deadline:
            status = one_exchange(port, rng)
            with lock:
                statuses.append(status)

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    return statuses


def wait_idle(server, limit=20):
    deadline = time.time() + limit
    while time.time() < deadline:
        m = server.metrics()
        if all(m[g] == 0 for g in GAUGES):
            return m
        time.sleep(0.2)
    return server.metrics()


def test_soak_mixed_traffic_with_cancellations(server):
    run_traffic(server.port, 5, seed=1)  # warm-up: threads, arenas, caches reach their working size
    m = wait_idle(server)
    assert all(m[g] == 0 for g in GAUGES), {g: m[g] for g in GAUGES}
    rss_start = rss_kib(server.proc.pid)
    aborted_start = m["deepinfer_aborted_requests_total"]

    statuses = run_traffic(server.port, SOAK_SECONDS, seed=2)
    m = wait_idle(server)
    rss_end = rss_kib(server.proc.pid)
    print(f"soak {SOAK_SECONDS:.0f} s: {len(statuses)} exchanges, {statuses.count(None)} left early, "
          f"aborted {m['deepinfer_aborted_requests_total'] - aborted_start:.0f}, "
          f"RSS {rss_start} -> {rss_end} KiB")
    assert all(m[g] == 0 for g in GAUGES), {g: m[g] for g in GAUGES}
    assert not [s for s in statuses if s is not None and s >= 500], sorted(set(statuses) - {None})
    assert statuses.count(200) > CLIENTS  # real traffic went through
    assert m["deepinfer_aborted_requests_total"] > aborted_start  # and some of it was cut off
    assert abs(rss_end - rss_start) <= 0.05 * rss_start, (rss_start, rss_end)
    assert server.proc.poll() is None
