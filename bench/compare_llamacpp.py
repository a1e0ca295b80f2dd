#!/usr/bin/env python3
"""DeepInfer vs llama.cpp (llama-cpp-python) on the same GGUF, same machine, same run.

Prefill: a 512-token prompt, one stream. Decode: 128 tokens after a 16-token prompt, one
stream. Each measurement alternates the two engines and reports medians of --reps runs, plus
the memory-bandwidth roofline for decode (weight bytes read per token / measured bandwidth).

Usage: python3 bench/compare_llamacpp.py [--reps 3] [--model PATH]
Needs: pip install llama-cpp-python (built from source by pip), and build/bin/deepinfer.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin", "deepinfer")
HOME = os.environ.get("DEEPINFER_HOME", os.path.expanduser("~/.cache/deepinfer"))
DEFAULT = os.path.join(HOME, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def ours(args, threads):
    out = subprocess.run([BIN, "bench", "--threads", str(threads), *args], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def llamacpp(model, threads, prompt_len, gen_len, mode):
    from llama_cpp import Llama
    llm = Llama(model_path=model, n_ctx=1024, n_threads=threads, n_threads_batch=threads,
                n_batch=512, verbose=False)
    rng = np.random.default_rng(0)
    prompt = [int(x) for x in rng.integers(100, 30000, prompt_len)]
    llm.eval(prompt[:8])  # warm-up
    llm.reset()
    if mode == "prefill":
        t = time.perf_counter()
        llm.eval(prompt)
        return prompt_len / (time.perf_counter() - t)
    llm.eval(prompt)
    tok, t = 100, time.perf_counter()
    for _ in range(gen_len):
        llm.eval([tok])
        tok = (tok * 7 + 13) % 30000 + 100
    return gen_len / (time.perf_counter() - t)


def weight_bytes(model):
    """Bytes decode reads per token: every tensor once, except the embedding table, of which
    only one row is read (the tied LM head then reads the whole table once)."""
    from gguf import GGUFReader
    r = GGUFReader(model)
    total = sum(int(t.n_bytes) for t in r.tensors)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--model", default=DEFAULT)
    a = ap.parse_args()
    bw = {}
    for line in subprocess.run([BIN, "bench", "--mode", "membw"], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        j = json.loads(line)
        bw[j["threads"]] = j["read_gb_per_s"]
    wb = weight_bytes(a.model)
    print(f"model {os.path.basename(a.model)}: {wb / 1e6:.1f} MB of weights read per decoded token")
    print("| threads | phase | DeepInfer (high) tok/s | DeepInfer (int8) tok/s | llama.cpp tok/s | ratio high / int8 | bound tok/s |")
    print("|---|---|---|---|---|---|---|")
    for threads in (1, 2):
        for mode, pl, gl in (("prefill", 512, 2), ("decode", 16, 128)):
            mine, mine8, theirs = [], [], []
            for _ in range(a.reps):
                base = ["--mode", mode, "--batch", "1", "--prompt-len", str(pl), "--gen-len", str(gl),
                        "--model", a.model]
                mine.append(ours(base, threads)["tokens_per_s"])
                mine8.append(ours(base + ["--matmul-precision", "int8"], threads)["tokens_per_s"])
                theirs.append(llamacpp(a.model, threads, pl, gl, mode))
            m, m8, t = (statistics.median(x) for x in (mine, mine8, theirs))
            bound = f"{bw[threads] * 1e9 / wb:.0f} (memory)" if mode == "decode" else "-"
            print(f"| {threads} | {mode} | {m:.0f} | {m8:.0f} | {t:.0f} | {m / t:.2f} / {m8 / t:.2f} | {bound} |",
                  flush=True)
    print(f"memory read bandwidth: {bw[1]:.1f} GB/s (1 thread), {bw[2]:.1f} GB/s (2 threads)")


if __name__ == "__main__":
    main()
