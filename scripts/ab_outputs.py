#!/usr/bin/env python3
"""Compares two `deepinfer` binaries' outputs byte for byte: greedy and seeded-sampling tokens,
logprobs (top 5) and text, on the default SmolLM2 model and every committed reference fixture
(tiny Llama, Qwen2, DeepSeek-V3, DeepSeek-V4; a 128-token byte-level tokenizer is written for the
fixtures that have none), plus structured-output runs. A refactor that must leave outputs
unchanged passes when every case is identical.

    scripts/ab_outputs.py --baseline /path/to/old/deepinfer --candidate build/bin/deepinfer

Exit 0 when identical, 1 with the first differing case otherwise."""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests/reference/fixtures"
sys.path.insert(0, str(ROOT / "tests/python"))
from byte_tokenizer import write_byte_tokenizer  # noqa: E402


def with_tokenizer(src, dst):
    shutil.copytree(src, dst)
    if (dst / "expected.json").exists():
        (dst / "expected.json").unlink()
    if not (dst / "tokenizer.json").exists():
        write_byte_tokenizer(dst)
    return dst


def cases(tmp):
    inputs = tmp / "in.jsonl"
    inputs.write_text("\n".join(json.dumps({"prompt_token_ids": ids}) for ids in
                                [[1, 2, 3, 4, 5], [7] * 40, list(range(10, 90)), [3, 1, 4, 1, 5, 9, 2, 6]]) + "\n")
    text_inputs = tmp / "text.jsonl"
    text_inputs.write_text("\n".join(json.dumps({"prompt": p}) for p in
                                     ["The capital of France is", "def fib(n):", "1, 2, 3, 4,"]) + "\n")
    schema = tmp / "schema.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                                                   "age": {"type": "integer"}},
                                  "required": ["name", "age"]}))
    sampling = [["--temperature", "0"], ["--temperature", "0.8", "--seed", "7", "--top-p", "0.9"],
                ["--temperature", "1.0", "--seed", "3", "--top-k", "20", "--repetition-penalty", "1.1"]]
    models = [("smollm2", "smollm2-135m-instruct")]
    for sub in ["tiny_llama", "tiny_qwen2"]:
        models.append((sub, str(with_tokenizer(FIXTURES / sub, tmp / sub))))
    for family in ["deepseek_v3", "deepseek_v4"]:
        for d in sorted((FIXTURES / family).iterdir()):
            if d.is_dir():
                models.append((f"{family}/{d.name}", str(with_tokenizer(d, tmp / family / d.name))))
    for name, model in models:
        fixture = name != "smollm2"
        for s in sampling:
            yield (f"{name} ids {s}", ["generate", "--model", model, "--input", str(inputs), "--max-tokens", "12",
                                       "--ignore-eos", "--json", "--logprobs", "5", "--threads", "1"] + s)
            for mode in (["--batch-invariant"], ["--overlap", "on"]):
                yield (f"{name} ids {s} {mode}", ["generate", "--model", model, "--input", str(inputs),
                                                 "--max-tokens", "12", "--ignore-eos", "--json", "--logprobs", "5",
                                                 "--threads", "2"] + mode + s)
        if not fixture:
            for s in sampling:
                yield (f"{name} text {s}", ["generate", "--model", model, "--input", str(text_inputs),
                                            "--max-tokens", "24", "--json", "--logprobs", "3"] + s)
            yield (f"{name} chat", ["generate", "--model", model, "--prompt", "What is 2+2?", "--max-tokens", "24",
                                    "--json", "--temperature", "0"])
            yield (f"{name} schema", ["generate", "--model", model, "--prompt", "Give a person as JSON.",
                                      "--json-schema", str(schema), "--max-tokens", "48", "--json",
                                      "--temperature", "0.7", "--seed", "1"])
            yield (f"{name} regex", ["generate", "--model", model, "--prompt", "A date:", "--no-chat",
                                     "--regex", r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "--max-tokens", "16", "--json",
                                     "--temperature", "0"])
            yield (f"{name} int8", ["generate", "--model", model, "--input", str(text_inputs), "--max-tokens", "16",
                                    "--json", "--temperature", "0", "--matmul-precision", "int8", "--logprobs", "2"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--candidate", default=str(ROOT / "build/bin/deepinfer"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        n = 0
        for label, argv in cases(tmp):
            outs = []
            for binary in (args.baseline, args.candidate):
                r = subprocess.run([binary] + argv, capture_output=True, text=True, timeout=600)
                outs.append((r.returncode, r.stdout))
            if outs[0] != outs[1]:
                print(f"DIFFERENT: {label}\n  argv: {' '.join(argv)}\n  baseline rc={outs[0][0]}: {outs[0][1][:2000]}\n"
                      f"  candidate rc={outs[1][0]}: {outs[1][1][:2000]}")
                return 1
            if outs[0][0] != 0:
                print(f"note: {label} exits {outs[0][0]} in both")
            n += 1
        print(f"identical: {n} cases")
        return 0


if __name__ == "__main__":
    sys.exit(main())
