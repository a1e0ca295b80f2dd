#!/usr/bin/env python3
"""DeepInfer vs llama.cpp (llama-cpp-python) on the same GGUF, same machine, same run.

Prefill: a 512-token prompt, one stream. Decode: 128 tokens after a 16-token prompt, one
stream. Each measurement alternates the two engines and reports medians of --reps runs, plus
the memory-bandwidth roofline for decode (weight bytes read per token / measured bandwidth).

Batched decode (--batched 1,2,4,8,16,32): B sequences decoding together, one token each per
step. llama.cpp gets one llama_decode per step over a llama_batch holding every sequence's
token (distinct seq_ids in one unified KV cache, via the low-level API), DeepInfer its
continuous-batching engine (`deepinfer bench --mode decode --batch ...`). Total tokens/s,
medians of --reps; llama.cpp's loop feeds fixed tokens (no sampling), ours samples greedily.

Long contexts (--batched 1,4,16 --prompt-lens 1024,4096): the same at each prompt length, plus
the step time against the bandwidth bound of a step (weights once plus every sequence's f32 KV
once, at the `bench --mode membw` rate of the same run). --kv-cache-dtype f32 (default: ours
f32, llama.cpp its default f16) or f16 / bf16 (both engines that type); --matmul-precision int8
runs ours with 8-bit activations, the arithmetic llama.cpp uses.

Usage: python3 bench/compare_llamacpp.py [--reps 3] [--model PATH] [--batched 1,2,4,8,16,32]
                                         [--prompt-lens 32] [--gen-len 32] [--plot chart.svg]

--plot FILE draws tokens/s per sequence against total tokens/s, one curve per engine and prompt
length, with `deepinfer bench --mode plot` (the rows stay beside it as FILE.jsonl).
Needs: pip install llama-cpp-python (built from source by pip), and build/bin/deepinfer.

llama.cpp's "extra buffer types" (its AMX and repacked-weight paths) are off unless
--llamacpp-extra-bufts: on the AMX host of 2026-12-03 the AMX matmul of llama-cpp-python 0.3.36
segfaults on its first call; for Q4_1 weights the other extra type (repack) does not apply, so
llama.cpp then runs its AVX-512 VNNI kernels.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("DEEPINFER_BIN", os.path.join(ROOT, "build", "bin", "deepinfer"))
HOME = os.environ.get("DEEPINFER_HOME", os.path.expanduser("~/.cache/deepinfer"))
DEFAULT = os.path.join(HOME, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


EXTRA_BUFTS = False  # --llamacpp-extra-bufts
_LIBRARY_MODEL_PARAMS = None


def llamacpp_model_params():
    """llama.cpp's default model parameters, extra buffer types only with --llamacpp-extra-bufts.
    Installed in place of llama_model_default_params, which llama_cpp.Llama asks."""
    params = _LIBRARY_MODEL_PARAMS()
    params.use_extra_bufts = EXTRA_BUFTS
    return params


def _install_model_params():
    global _LIBRARY_MODEL_PARAMS
    import llama_cpp.llama_cpp as C
    if _LIBRARY_MODEL_PARAMS is None:
        _LIBRARY_MODEL_PARAMS = C.llama_model_default_params
        C.llama_model_default_params = llamacpp_model_params


def ours(args, threads):
    out = subprocess.run([BIN, "bench", "--threads", str(threads), *args], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def llamacpp(model, threads, prompt_len, gen_len, mode):
    from llama_cpp import Llama
    _install_model_params()
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


_QUIET_LOG = None


def _quiet_log():
    import llama_cpp as L
    global _QUIET_LOG
    if _QUIET_LOG is None:
        _QUIET_LOG = L.llama_log_callback(lambda level, text, user: None)
    return _QUIET_LOG


GGML_TYPES = {"f16": 1, "bf16": 30}  # ggml_type values for llama.cpp's type_k / type_v


def llamacpp_batched(model, threads, batch, prompt_len, gen_len, kv_dtype="f32"):
    """Total decode tokens/s of `batch` sequences stepped together by llama_decode."""
    import llama_cpp as L
    L.llama_log_set(_quiet_log(), None)
    L.llama_backend_init()
    _install_model_params()
    mparams = llamacpp_model_params()
    m = L.llama_model_load_from_file(model.encode(), mparams)
    cp = L.llama_context_default_params()
    cp.n_ctx = ((batch * (prompt_len + gen_len + 8)) // 256 + 1) * 256
    cp.n_batch = max(512, batch * prompt_len)
    cp.n_ubatch = 512
    cp.n_seq_max = batch
    cp.kv_unified = True  # one KV pool shared by all sequences, like ours
    cp.n_threads = cp.n_threads_batch = threads
    cp.no_perf = True
    if kv_dtype in GGML_TYPES:
        cp.type_k = cp.type_v = GGML_TYPES[kv_dtype]
    ctx = L.llama_init_from_model(m, cp)
    b = L.llama_batch_init(max(batch * prompt_len, batch), 0, 1)

    def submit(entries):  # [(token, pos, seq, want_logits)]
        b.n_tokens = len(entries)
        for i, (tok, pos, seq, logits) in enumerate(entries):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, pos, 1, int(logits)
            b.seq_id[i][0] = seq
        rc = L.llama_decode(ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} (batch {batch})")

    rng = np.random.default_rng(0)
    prompts = [[int(x) for x in rng.integers(100, 30000, prompt_len)] for _ in range(batch)]
    submit([(prompts[s][j], j, s, j == prompt_len - 1) for s in range(batch) for j in range(prompt_len)])
    # The first decode step is warm-up (as ours starts timing once every sequence has a token).
    submit([(100 + s, prompt_len, s, True) for s in range(batch)])
    t = time.perf_counter()
    for step in range(1, gen_len):
        submit([((s * 31 + step * 7) % 30000 + 100, prompt_len + step, s, True) for s in range(batch)])
    secs = time.perf_counter() - t
    L.llama_batch_free(b)
    L.llama_free(ctx)
    L.llama_model_free(m)
    return batch * (gen_len - 1) / secs


def kv_bytes_per_token(model, kv_dtype="f32"):
    """Bytes of our K and V per token over all layers (Llama-family GGUF metadata)."""
    from gguf import GGUFReader
    r = GGUFReader(model)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def field(name):
        return int(r.fields[f"{arch}.{name}"].parts[-1][0])
    head_dim = field("embedding_length") // field("attention.head_count")
    element = 4 if kv_dtype == "f32" else 2
    return field("block_count") * 2 * field("attention.head_count_kv") * head_dim * element


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def batched(a):
    batches = [int(x) for x in a.batched.split(",")]
    lens = [int(x) for x in a.prompt_lens.split(",")]
    gl = a.gen_len
    bw = membw(a.threads)
    wb, kvb = weight_bytes(a.model), kv_bytes_per_token(a.model, a.kv_cache_dtype)
    print(f"batched decode: {gl} tokens each after the prompt, {a.threads} threads, medians of {a.reps}; "
          f"KV cache {a.kv_cache_dtype}, matmul precision {a.matmul_precision}; "
          f"membw {bw:.1f} GB/s; weights {wb / 1e6:.1f} MB, KV {kvb / 1e3:.1f} KB per token")
    print("| context | sequences | DeepInfer total tok/s | per sequence | llama.cpp total tok/s | ratio "
          "| step ms | bound ms | of bound | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for pl in lens:
        for bsz in batches:
            mine, theirs, loads = [], [], []
            for _ in range(a.reps):
                loads.append(load_average())
                gb = max(1.0, 1.3 * bsz * (pl + gl + 32) * kvb / 2**30)
                j = ours(["--mode", "decode", "--batch", str(bsz), "--prompt-len", str(pl), "--gen-len",
                          str(gl), "--max-num-seqs", str(max(bsz, 1)), "--kv-cache-gb", f"{gb:.2f}",
                          "--model", a.model, "--kv-cache-dtype", a.kv_cache_dtype,
                          "--matmul-precision", a.matmul_precision], a.threads)
                mine.append(j["tokens_per_s"])
                theirs.append(llamacpp_batched(a.model, a.threads, bsz, pl, gl, a.kv_cache_dtype))
            m, t = (statistics.median(x) for x in (mine, theirs))
            step = bsz / m
            # The window's mean context: prompt plus half the generated tokens.
            bound = (wb + bsz * (pl + gl / 2) * kvb) / (bw * 1e9)
            print(f"| {pl} | {bsz} | {m:.1f} | {m / bsz:.1f} | {t:.1f} | {m / t:.2f} | {step * 1e3:.1f} "
                  f"| {bound * 1e3:.1f} | {bound / step:.0%} | {'; '.join(loads)} |", flush=True)
            for engine, total in (("DeepInfer", m), ("llama.cpp", t)):
                rows.append({"engine": engine, "mode": "decode", "batch": bsz, "prompt_tokens": pl,
                             "tokens_per_s": total, "per_seq_tokens_per_s": total / bsz})
    write_rows_and_plot(a, rows)


def write_rows_and_plot(a, rows):
    """--rows-out: both engines' points as JSON lines; --plot: drawn by `deepinfer bench --mode plot`."""
    path = a.rows_out
    if a.plot and not path:
        path = os.path.splitext(a.plot)[0] + ".jsonl"
    if not path:
        return
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    if a.plot:
        subprocess.run([BIN, "bench", "--mode", "plot", "--plot-with", path, "--plot", a.plot], check=True)
        print(f"chart: {a.plot} (rows: {path})")


def membw(threads):
    for line in subprocess.run([BIN, "bench", "--mode", "membw"], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        j = json.loads(line)
        if j["threads"] == threads:
            return j["read_gb_per_s"]
    raise RuntimeError(f"bench --mode membw gave no {threads}-thread figure")


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
    ap.add_argument("--batched", default="", help="batch sizes, e.g. 1,2,4,8,16,32: batched decode only")
    ap.add_argument("--threads", type=int, default=2, help="threads for --batched")
    ap.add_argument("--prompt-lens", default="32", help="--batched: prompt lengths (context), e.g. 1024,4096")
    ap.add_argument("--gen-len", type=int, default=32, help="--batched: tokens generated per sequence")
    ap.add_argument("--kv-cache-dtype", default="f32", choices=["f32", "f16", "bf16"],
                    help="--batched: KV cache type (f32: ours f32, llama.cpp its default f16; "
                         "f16/bf16: both engines)")
    ap.add_argument("--matmul-precision", default="high", choices=["high", "int8"],
                    help="--batched: our matmul precision")
    ap.add_argument("--rows-out", default="", help="--batched: write both engines' points as JSON lines here")
    ap.add_argument("--plot", default="", help="--batched: draw both engines' curves to FILE.svg/.png "
                                               "(deepinfer bench --mode plot; rows kept beside it as .jsonl)")
    ap.add_argument("--llamacpp-extra-bufts", action="store_true",
                    help="let llama.cpp use its extra buffer types (AMX, repacked weights)")
    a = ap.parse_args()
    global EXTRA_BUFTS
    EXTRA_BUFTS = a.llamacpp_extra_bufts
    if a.batched:
        batched(a)
        return
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
