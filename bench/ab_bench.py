#!/usr/bin/env python3
"""Two `deepinfer` binaries' `bench` figures, measured alternately in one run (A, B, A, B, ...)
so that a busy or throttled machine slows both alike: prefill, single-stream decode, batched
decode and structured-output masks. Prints one table row per figure with both medians and
their ratio (candidate / baseline; > 1 = the candidate is faster, for masks < 1 = faster).

    python3 bench/ab_bench.py --baseline /path/to/old/deepinfer --candidate build/bin/deepinfer
    python3 bench/ab_bench.py --baseline OLD --reps 5 --only prefill,decode

Mask figures need JSONSchemaBench (../shared/data/jsonschemabench); they are skipped without it."""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "jsonschemabench"

# name -> (bench arguments, the figure to read from the last JSON line, what the figure means)
FIGURES = {
    "prefill": (["--mode", "prefill", "--prompt-len", "1024", "--batch", "1"], "tokens_per_s",
                "prefill tok/s, one 1024-token prompt"),
    "decode": (["--mode", "decode", "--prompt-len", "256", "--gen-len", "64", "--batch", "1"], "tokens_per_s",
               "decode tok/s, 1 sequence, 256-token prompt"),
    "batched": (["--mode", "decode", "--prompt-len", "1024", "--gen-len", "32", "--batch", "16",
                 "--max-num-seqs", "16"], "tokens_per_s", "decode tok/s, 16 sequences, 1024-token prompts"),
    "mask": (["--mode", "mask", "--json-mode", "compact", "--stride", "40"], "mask_us_p50",
             "mask time per token p50 (us), JSONSchemaBench every 40th schema, compact JSON"),
}


def run_once(binary, args, key, threads):
    cmd = [binary, "bench", "--threads", str(threads), *args]
    if args[1] == "mask":
        cmd += ["--data", str(DATA)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    lines = [json.loads(line) for line in out.stdout.strip().splitlines() if line.startswith("{")]
    for rec in reversed(lines):
        if key in rec:
            return float(rec[key])
    sys.exit(f"{' '.join(cmd)}: no '{key}' in its output")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--candidate", default=str(ROOT / "build/bin/deepinfer"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default=",".join(FIGURES), help="comma-separated: " + ",".join(FIGURES))
    args = ap.parse_args()
    rows = []
    for name in args.only.split(","):
        if name not in FIGURES:
            sys.exit(f"--only: unknown figure '{name}' ({', '.join(FIGURES)})")
        bench_args, key, meaning = FIGURES[name]
        if name == "mask" and not DATA.is_dir():
            print(f"skip mask: {DATA} not found", file=sys.stderr)
            continue
        a, b = [], []
        for _ in range(args.reps):
            a.append(run_once(args.baseline, bench_args, key, args.threads))
            b.append(run_once(args.candidate, bench_args, key, args.threads))
        ma, mb = statistics.median(a), statistics.median(b)
        rows.append((meaning, ma, mb, mb / ma if ma else float("nan")))
        print(f"{name}: baseline {a} candidate {b}", file=sys.stderr)
    print("| figure | baseline | candidate | candidate / baseline |")
    print("|---|---|---|---|")
    for meaning, ma, mb, ratio in rows:
        print(f"| {meaning} | {ma:.1f} | {mb:.1f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
