#!/usr/bin/env python3
"""Measured MoE load imbalance of `deepinfer serve --ep N` with routing skewed on purpose: the
busiest rank's (token, expert) rows over the mean rank's, per MoE layer, averaged over the
layers, over many engine steps (`deepinfer_ep_moe_layer_imbalance`, docs/parallel.md).

Two servers per EP size, the same load (waves of concurrent completions of random byte prompts):
  no EPLB   `serve --ep N` (experts contiguous, never moved): the window over every busy step;
  live EPLB `serve --ep N --redundant R --eplb-interval I --eplb-window 100000`: the placement at
            start is EPLB's for even load; every I busy steps live EPLB places from the steps
            since the last switch. Reported: the window before the first switch (the start
            placement), and the mean of the windows measured after it (each later switch's
            "before" and the final window), weighted by their steps.

    python3 tests/reference/make_wide_deepseek_v3.py /tmp/wide_v3
    DEEPINFER_ROUTER_ZIPF=0.05 python3 bench/ep_rebalance_imbalance.py --model /tmp/wide_v3 --ep 2,4

Prints one JSON line per EP size. Loopback only; bounded in requests and time."""
import argparse
import concurrent.futures
import http.client
import json
import os
import pathlib
import random
import signal
import socket
import subprocess
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines()
                                     if line and not line.startswith("#"))}


def complete(port, prompt, max_tokens):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True})
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def start(binary, model, port, args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [binary, "serve", "--model", model, "--port", str(port), "--threads", "1", "--served-model-name", "m",
           "--max-num-seqs", "256", *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {cmd}")
        time.sleep(0.3)
    proc.kill()
    raise SystemExit("server did not start")


def run(binary, model, args, waves, concurrency, max_tokens, seed):
    """Sends the load; returns the /metrics samples seen at every switch and at the end."""
    port = free_port()
    proc = start(binary, model, port, args)
    rng = random.Random(seed)
    prompts = ["".join(chr(rng.randint(97, 122)) for _ in range(rng.randint(8, 64)))
               for _ in range(waves * concurrency)]
    switches, done = [], threading.Event()

    def watch():  # each switch's "before" window, as /metrics shows it after the switch
        seen = 0
        while not done.is_set():
            m = metrics(port)
            if m["deepinfer_ep_rebalances_total"] > seen:
                seen = m["deepinfer_ep_rebalances_total"]
                switches.append(m)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    failed = 0
    try:
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            for w in range(waves):
                batch = prompts[w * concurrency:(w + 1) * concurrency]
                failed += sum(s != 200 for s in pool.map(lambda p: complete(port, p, max_tokens), batch))
    finally:
        done.set()
        watcher.join()
        final = metrics(port)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    return switches, final, failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ep", default="2,4")
    ap.add_argument("--redundant", type=int, default=8)
    ap.add_argument("--interval", type=int, default=40, help="live EPLB every this many busy steps")
    ap.add_argument("--waves", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--binary", default=str(ROOT / "build" / "bin" / "deepinfer"))
    a = ap.parse_args()
    for ep in map(int, a.ep.split(",")):
        load = (a.waves, a.concurrency, a.max_tokens, 7)
        _, fixed, failed_fixed = run(a.binary, a.model, ["--ep", str(ep), "--eplb-window", "100000"], *load)
        switches, final, failed_live = run(
            a.binary, a.model, ["--ep", str(ep), "--redundant", str(a.redundant), "--eplb-interval", str(a.interval),
                                "--eplb-window", "100000"], *load)
        # The window before switch k (k >= 2) and the last window measured EPLB's live placements.
        after = [(m["deepinfer_ep_moe_layer_imbalance_before_rebalance"],
                  m["deepinfer_ep_load_window_steps_before_rebalance"]) for m in switches[1:]]
        after.append((final["deepinfer_ep_moe_layer_imbalance"], final["deepinfer_ep_load_window_steps"]))
        steps = sum(s for _, s in after)
        print(json.dumps({
            "ep": ep, "redundant": a.redundant,
            "no_eplb": round(fixed["deepinfer_ep_moe_layer_imbalance"], 3),
            "no_eplb_steps": int(fixed["deepinfer_ep_load_window_steps"]),
            "eplb_start_placement": round(switches[0]["deepinfer_ep_moe_layer_imbalance_before_rebalance"], 3)
            if switches else None,
            "eplb_live": round(sum(v * s for v, s in after) / steps, 3) if steps else None,
            "eplb_live_steps": int(steps) if switches else 0,
            "eplb_planned_last": round(final["deepinfer_ep_moe_layer_imbalance_planned"], 3),
            "rebalances": int(final["deepinfer_ep_rebalances_total"]),
            "experts_read": int(final["deepinfer_ep_rebalance_experts_loaded_total"]),
            "failed_requests": failed_fixed + failed_live}), flush=True)


if __name__ == "__main__":
    main()
