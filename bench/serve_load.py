#!/usr/bin/env python3
"""Load test for `deepinfer serve`: N concurrent streaming chat clients, a fixed number of
requests each, at several concurrency levels. Prints one JSON line per level (throughput,
TTFT p50/p99, errors) and the server's memory before and after.

    python3 bench/serve_load.py                       # starts build/bin/deepinfer serve itself
    python3 bench/serve_load.py --concurrency 1,8,32,64 --requests-per-client 2 --max-tokens 64

Only loopback traffic; bounded in requests and time. The clients are plain http.client
threads (light, so most of the 2 cores stay with the server)."""
import argparse
import concurrent.futures
import http.client
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROMPTS = ["Tell me about the ocean.", "What is the capital of France?", "Write a short poem about rain.",
           "Explain what a CPU does.", "List three fruits.", "Why is the sky blue?", "Describe a cat.",
           "How do airplanes fly?"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_request(port, i, max_tokens):
    body = json.dumps({"messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                       "max_tokens": max_tokens, "temperature": 0.7, "seed": i, "stream": True,
                       "stream_options": {"include_usage": True}, "ignore_eos": True})
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        return {"error": resp.status}
    ttft = None
    tokens = 0
    buf = b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: ") or event == b"data: [DONE]":
                continue
            data = json.loads(event[6:])
            if data.get("usage"):
                tokens = data["usage"]["completion_tokens"]
            for c in data.get("choices", []):
                if c["delta"].get("content") and ttft is None:
                    ttft = time.perf_counter() - start
    conn.close()
    return {"ttft": ttft if ttft is not None else time.perf_counter() - start, "tokens": tokens,
            "latency": time.perf_counter() - start}


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="1,8,32,64")
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--model", default="")
    ap.add_argument("--port", type=int, default=0, help="use a running server instead of starting one")
    args = ap.parse_args()

    proc = None
    port = args.port
    if not port:
        port = free_port()
        cmd = [str(ROOT / "build/bin/deepinfer"), "serve", "--port", str(port), "--max-num-seqs", "64"]
        if args.model:
            cmd += ["--model", args.model]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
    try:
        one_request(port, 0, 4)  # warm up
        baseline = rss_mb(proc.pid) if proc else None
        for c in [int(x) for x in args.concurrency.split(",")]:
            n = c * args.requests_per_client
            start = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(c) as pool:
                results = list(pool.map(lambda i: one_request(port, i, args.max_tokens), range(n)))
            wall = time.perf_counter() - start
            ok = [r for r in results if "error" not in r]
            tokens = sum(r["tokens"] for r in ok)
            print(json.dumps({
                "mode": "serve", "batch": c, "requests": n, "errors": n - len(ok),
                "tokens_per_s": round(tokens / wall, 1),
                "per_seq_tokens_per_s": round(sum(r["tokens"] / max(r["latency"] - r["ttft"], 1e-6) for r in ok) / max(len(ok), 1), 1),
                "ttft_ms": round(1000 * percentile([r["ttft"] for r in ok], 50), 1),
                "ttft_p99_ms": round(1000 * percentile([r["ttft"] for r in ok], 99), 1),
                "rss_mb": round(rss_mb(proc.pid), 1) if proc else None}), flush=True)
        if proc:
            time.sleep(1)
            print(json.dumps({"rss_baseline_mb": round(baseline, 1), "rss_after_mb": round(rss_mb(proc.pid), 1)}))
    finally:
        if proc:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
