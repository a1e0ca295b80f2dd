#!/usr/bin/env python3
"""Replays fixed-k verification traces through DSpark-style gates, offline and load-free.

    build/bin/deepinfer bench --mode spec --spec-configs fixed --spec-task code-edit --batch 8 \\
        --gen-len 48 --spec-trace /tmp/tr
    python3 bench/spec_trace_replay.py /tmp/tr.code-edit.b8.fixed.jsonl [more traces]

A trace line is one verification (Speculator::write_trace): `verified` drafts checked,
`accepted` of them passed, and per draft the drafter's features (n-gram `support` / `agree`,
`signals`), plus the match's `context_match`, `occurrences`, `distance` and the target's
logprob of the token before the draft (`target_logprob`).

Prints, per candidate signal:
- calibration: per bucket, drafts reached (every earlier draft accepted) and the share of
  them accepted, i.e. the conditional acceptance the gate estimates;
- the gate replayed: a Beta(1, 1) estimate per (position, signal, last outcome), learnt online
  from the outcomes the gate itself verified (as the engine's AcceptanceModel), the first
  draft always kept, the tail cut where the product of the estimates falls below tau; the
  share of the trace's verified drafts cut and the share of its accepted drafts cut.
A fixed-k trace's drafts are all verified, so "accepted under the gate" is min(accepted, kept).
"""
import json
import math
import sys
from collections import defaultdict


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            rows.extend(json.loads(line) for line in f if line.strip())
    return rows


def ctx_bucket(m):
    return max(m, 1) if m <= 3 else 4 if m < 8 else 5 if m < 16 else 6


def agree_bucket(r, j):
    """1: occurrences part at j (the draft's token is a minority), 2: a single occurrence,
    3: a majority, not all, 4: every occurrence (>= 2) agrees."""
    s, a = r["support"][j], r["agree"][j]
    if s <= 1:
        return 2
    if a == s:
        return 4
    return 3 if 2 * a > s else 1


def agree3(r, j):
    """agree_bucket with a majority-not-all merged into the parted bucket: 1 parted, 2 single, 3 all."""
    b = agree_bucket(r, j)
    return 1 if b in (1, 3) else 2 if b == 2 else 3


def prob_bucket(lp):
    p = math.exp(lp) if lp <= 0 else 1.0
    return 1 if p < 0.5 else 2 if p < 0.8 else 3 if p < 0.95 else 4


# Candidate per-draft signals: f(row, j) -> a hashable bucket.
SIGNALS = {
    "position only": lambda r, j: 0,
    "context_match (current)": lambda r, j: ctx_bucket(max(r["match_length"], r["context_match"])),
    "agreement": agree_bucket,
    "agreement x context_match<4|>=4": lambda r, j: (agree_bucket(r, j), r["context_match"] >= 4),
    "agreement x span(<3|<8|>=8)": lambda r, j: (agree_bucket(r, j),
                                                0 if r["context_match"] < 3 else 1 if r["context_match"] < 8 else 2),
    "agreement3 x span(<3|>=3)": lambda r, j: (agree3(r, j), r["context_match"] >= 3),
    "agreement3 x span(<4|>=4)": lambda r, j: (agree3(r, j), r["context_match"] >= 4),
    "agreement3 x span(<8|>=8) (DSpark's signal)": lambda r, j: (agree3(r, j), r["context_match"] >= 8),
    "target prob (prev token)": lambda r, j: prob_bucket(r["target_logprob"]),
    "agreement x target prob": lambda r, j: (agree_bucket(r, j), prob_bucket(r["target_logprob"])),
    "occurrences (1, 2-3, 4+)": lambda r, j: min(r["occurrences"], 4) // 2,
    "distance (<64, <256, 256+)": lambda r, j: 0 if r["distance"] < 64 else 1 if r["distance"] < 256 else 2,
    "agreement x distance": lambda r, j: (agree_bucket(r, j), 0 if r["distance"] < 64 else 1),
}


def calibration(rows, f):
    reached, acc = defaultdict(int), defaultdict(int)
    for r in rows:
        a = r["accepted"]
        for j in range(min(r["verified"], a + 1)):
            b = f(r, j)
            reached[b] += 1
            acc[b] += j < a
    return {b: (reached[b], acc[b]) for b in reached}


def history_of(verified, accepted):
    return 1 if accepted == 0 else 2 if accepted < verified else 3


def replay(rows, f, tau, use_history=True, max_cell=400.0):
    cells = defaultdict(lambda: [1.0, 1.0])
    hist = {}
    tot_v = tot_a = kept_v = kept_a = 0
    for r in rows:
        k, a, seq = r["verified"], r["accepted"], r["seq"]
        h = hist.get(seq, 0) if use_history else 0
        keys = [(j, h, f(r, j)) for j in range(k)]
        p, c = 1.0, 0
        for j in range(k):
            acc, rej = cells[keys[j]]
            p *= min(max(acc / (acc + rej), 0.01), 0.99)
            if j > 0 and p < tau:
                break
            c = j + 1
        ka = min(a, c)
        tot_v += k
        tot_a += a
        kept_v += c
        kept_a += ka
        for j in range(ka + (1 if ka < c else 0)):
            cell = cells[keys[j]]
            cell[0 if j < ka else 1] += 1
            n = cell[0] + cell[1]
            if n > max_cell:
                cell[0] *= max_cell / n
                cell[1] *= max_cell / n
        hist[seq] = history_of(c, ka)
    return 1 - kept_v / tot_v, 1 - kept_a / max(tot_a, 1)


def main():
    paths = sys.argv[1:]
    if not paths:
        sys.exit(__doc__)
    taus = [0.05, 0.10, 0.15, 0.20, 0.30]
    for group in [[p] for p in paths] + ([paths] if len(paths) > 1 else []):
        rows = load(group)
        v = sum(r["verified"] for r in rows)
        a = sum(r["accepted"] for r in rows)
        print(f"\n## {' + '.join(p.rsplit('/', 1)[-1] for p in group)}: {len(rows)} verifications, "
              f"{v} drafts verified, {a} accepted ({a / max(v, 1):.0%})")
        print("\n### calibration: per bucket, drafts reached (earlier drafts all accepted) -> share accepted\n")
        for name, f in SIGNALS.items():
            cal = calibration(rows, f)
            cells = ", ".join(f"{b}: {n} -> {x / n:.0%}" for b, (n, x) in sorted(cal.items(), key=lambda t: str(t[0])))
            print(f"- {name}: {cells}")
        print("\n### gate replay: verified cut / accepted cut at each tau\n")
        print("| signal | " + " | ".join(f"tau {t:.2f}" for t in taus) + " |")
        print("|---|" + "---|" * len(taus))
        for name, f in SIGNALS.items():
            cuts = [replay(rows, f, t) for t in taus]
            print(f"| {name} | " + " | ".join(f"{cv:.0%} / {ca:.0%}" for cv, ca in cuts) + " |")


if __name__ == "__main__":
    main()
