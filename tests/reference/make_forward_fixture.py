#!/usr/bin/env python3
"""Reference logits and greedy continuations for the default model (SmolLM2-135M-Instruct Q4_1).

The Hugging Face model is built from the same GGUF (transformers dequantizes it to float32),
so differences from DeepInfer come only from arithmetic (DeepInfer, like llama.cpp, quantizes
activations to 8 bits for the integer dot products). llama.cpp's greedy continuations on the
same file are recorded too, as a second opinion.

Usage: python3 tests/reference/make_forward_fixture.py [GGUF]
Needs: torch, transformers, gguf, numpy, llama-cpp-python (PyPI). Writes
tests/reference/fixtures/forward_smollm2.json.
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

HOME = os.environ.get("DEEPINFER_HOME", os.path.expanduser("~/.cache/deepinfer"))
GGUF = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HOME, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(os.path.dirname(__file__), "fixtures", "forward_smollm2.json")

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village by the sea, there lived",
    "Les chats sont des animaux",
    "1, 2, 3, 4, 5, 6, 7,",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "Water boils at a temperature of",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWrite a haiku about the ocean.<|im_end|>\n<|im_start|>assistant\n",
]
GEN_TOKENS = 64
N_PROBE = 512  # logits at a fixed random subset of the vocabulary, for a max-abs-diff bound
TOP_K = 8


def main():
    d, f = os.path.split(GGUF)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32)
    model.eval()
    rng = np.random.default_rng(1234)
    probe = sorted(rng.choice(model.config.vocab_size, N_PROBE, replace=False).tolist())
    cases = []
    try:
        from llama_cpp import Llama
        llm = Llama(model_path=GGUF, n_ctx=512, n_threads=2, verbose=False, logits_all=False)
    except Exception as e:  # noqa: BLE001
        print("llama-cpp-python unavailable:", e)
        llm = None
    for prompt in PROMPTS:
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float().numpy()
            # Plain argmax decoding (model.generate would apply the generation config's
            # processors, e.g. EOS handling); margins are top-1 minus top-2 at each step: where
            # tiny, a different but correct arithmetic may legitimately pick the other token.
            gen, margins = [], []
            for _ in range(GEN_TOKENS):
                row = model(torch.tensor([ids + gen])).logits[0, -1].float().numpy()
                top2 = np.sort(row)[-2:]
                margins.append(float(top2[1] - top2[0]))
                gen.append(int(np.argmax(row)))
        positions = []
        for row in logits:
            top = np.argsort(-row, kind="stable")[:TOP_K]
            positions.append({
                "top_ids": top.tolist(),
                "top_logits": [float(row[i]) for i in top],
                "probe_logits": [float(row[i]) for i in probe],
            })
        case = {"prompt": prompt, "ids": ids, "positions": positions, "greedy_hf": gen,
                "greedy_hf_margins": margins}
        if llm is not None:
            llm.reset()
            out = []
            for t in llm.generate(ids, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
                out.append(int(t))
                if len(out) == GEN_TOKENS:
                    break
            case["greedy_llamacpp"] = out
        cases.append(case)
        print(repr(prompt[:40]), "->", repr(tok.decode(gen)[:60]))
    with open(OUT, "w") as fh:
        json.dump({"gguf": os.path.basename(GGUF), "probe_ids": probe, "cases": cases}, fh)
    print("wrote", OUT, os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
