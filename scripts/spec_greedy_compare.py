#!/usr/bin/env python3
"""Greedy decoding with and without speculation must give the same tokens (issue 23): runs N
mixed prompts (chat questions, code to write or edit, and JSON under a JSON Schema) through
`deepinfer generate` with and without `--speculative ngram` (and any other drafter flags given
with --spec-flags) at batch 32 and batch 1, and compares token ids and text request by
request. The JSON prompts run under --json-schema (one schema per run), the others plain.

    scripts/spec_greedy_compare.py [--n 200] [--max-tokens 64] [--batches 32,1]
        [--groups chat,code,json] [--model M] [--binary build/bin/deepinfer]
        [--spec-flags "--speculative ngram"]

Prints one line per (group, batch) with the requests compared, drafts accepted and seconds, and
exit status 0 when every request is identical, 1 with the first difference otherwise.
Takes minutes on the default model (batch 1 dominates); tests/python/test_speculative_cli.py
runs it with a few prompts."""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOME = Path(os.environ.get("DEEPINFER_HOME", Path.home() / ".cache" / "deepinfer"))

TOPICS = ["the moon", "bread", "rivers", "chess", "volcanoes", "bees", "trains", "glass", "tea", "maps",
          "clocks", "whales", "paper", "salt", "bridges", "music", "rain", "copper", "owls", "sand"]
CHAT = ["Tell me three facts about {t}.", "Explain {t} to a child in two sentences.",
        "Write a short poem about {t}.", "What is the history of {t}? Be brief.",
        "Give me a list of five words related to {t}."]
CODE = ["Write a Python function that counts how often each word appears in a string about {t}.",
        "Rename the variable x to {v} everywhere:\ndef f(x):\n    y = x * 2\n    return x + y + x\n",
        "Add type hints to this function:\ndef total_{v}(items, tax):\n    return sum(items) * (1 + tax)\n",
        "Write a JavaScript function named {v}Length that returns the length of an array.",
        "Fix the bug: def mean_{v}(xs):\n    return sum(xs) / len(xs) + 1\n"]
JSON = ["Describe a person who loves {t} as JSON.", "Give me a person from a story about {t} as JSON.",
        "Return a JSON record for someone who studies {t}."]
SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                         "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age", "tags"]}


def prompts(n):
    """n prompts: 40% chat, 35% code, 25% JSON (at least one of each)."""
    n_json = max(1, n // 4)
    n_code = max(1, (n * 35) // 100)
    n_chat = max(1, n - n_json - n_code)
    def make(templates, count):
        out = []
        for i in range(count):
            t = TOPICS[(i // len(templates)) % len(TOPICS)]  # every (template, topic) pair once
            out.append(templates[i % len(templates)].format(t=t, v=re.sub(r"\W", "_", t)) +
                       ("" if i < len(TOPICS) * len(templates) else f" (variant {i})"))
        return out
    return {"chat": make(CHAT, n_chat), "code": make(CODE, n_code), "json": make(JSON, n_json)}


def generate(binary, model, tmp, name, lines, batch, max_tokens, flags):
    inp = tmp / f"{name}.in.jsonl"
    out = tmp / f"{name}.out.jsonl"
    inp.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in lines))
    cmd = [str(binary), "generate", "--model", str(model), "--input", str(inp), "--output", str(out),
           "--max-tokens", str(max_tokens), "--max-num-seqs", str(batch), "--stats", *flags]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    m = re.search(r"(\d+) verified, (\d+) accepted", r.stderr)
    return rows, (int(m.group(2)) if m else 0), time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--batches", default="32,1")
    ap.add_argument("--model", default=str(HOME / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--binary", default=str(ROOT / "build" / "bin" / "deepinfer"))
    ap.add_argument("--threads", default="2")
    ap.add_argument("--spec-flags", default="--speculative ngram")
    ap.add_argument("--groups", default="chat,code,json", help="which prompt kinds to run")
    ap.add_argument("--no-batch-invariant", action="store_true",
                    help="compare without --batch-invariant (greedy ties may then break differently)")
    a = ap.parse_args()
    groups = {k: v for k, v in prompts(a.n).items() if k in a.groups.split(",")}
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        schema = tmp / "schema.json"
        schema.write_text(json.dumps(SCHEMA))
        for batch in [int(b) for b in a.batches.split(",")]:
            for group, lines in groups.items():
                flags = ["--threads", a.threads] + ([] if a.no_batch_invariant else ["--batch-invariant"])
                flags += ["--json-schema", str(schema)] if group == "json" else []
                want, _, t_off = generate(a.binary, a.model, tmp, f"{group}-off", lines, batch, a.max_tokens, flags)
                got, accepted, t_on = generate(a.binary, a.model, tmp, f"{group}-on", lines, batch, a.max_tokens,
                                               flags + shlex.split(a.spec_flags))
                same = sum(w["token_ids"] == g["token_ids"] and w["text"] == g["text"] for w, g in zip(want, got))
                print(f"batch {batch:3d} {group:5s}: {same}/{len(lines)} identical, {accepted} drafts accepted, "
                      f"{t_off:.1f} s off, {t_on:.1f} s with {a.spec_flags}", flush=True)
                for i, (w, g) in enumerate(zip(want, got)):
                    if w["token_ids"] != g["token_ids"] or w["text"] != g["text"]:
                        failures += 1
                        if failures == 1:
                            print(f"first difference: batch {batch} {group} prompt {i} {lines[i]!r}:\n"
                                  f"  off: {w['text']!r}\n  on:  {g['text']!r}")
    total = len(a.batches.split(",")) * sum(len(v) for v in groups.values())
    print(f"{total - failures}/{total} requests identical")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
