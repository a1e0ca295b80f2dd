#!/usr/bin/env python3
"""Mask-time and compile-time benchmark of XGrammar and llguidance on JSONSchemaBench, with the
HF tokenizer of the same GGUF DeepInfer uses, printing the same statistics as
`deepinfer bench --mode mask` (src/deepinfer/tools/bench_mask.cc).

  pip install xgrammar llguidance transformers gguf
  python3 bench/mask_peers.py --gguf ~/.cache/deepinfer/models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --data ../shared/data/jsonschemabench [--stride 20] [--limit N] [--engines xgrammar,llguidance]

Instances are written like DeepInfer's tests write them: compact JSON with object keys in the
order the schema declares them; each valid instance is walked token by token (HF encoding),
computing the mask before every token. Invalid instances are walked too, to count wrongly
accepted ones.
"""
import argparse
import json
import os
import statistics
import time


def collect_order(schema, order, depth=0):
    if depth > 64:
        return
    if isinstance(schema, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            for k in props:
                order.setdefault(k, len(order))
        req = schema.get("required")
        if isinstance(req, list):
            for r in req:
                if isinstance(r, str):
                    order.setdefault(r, len(order))
        for v in schema.values():
            collect_order(v, order, depth + 1)
    elif isinstance(schema, list):
        for v in schema:
            collect_order(v, order, depth + 1)


def reorder(v, order):
    if isinstance(v, list):
        return [reorder(x, order) for x in v]
    if not isinstance(v, dict):
        return v
    unknown = len(order)
    keys = []
    for k in v:
        if k in order:
            keys.append((order[k], k))
        else:
            keys.append((unknown, k))
            unknown += 1
    keys.sort(key=lambda p: p[0])
    return {k: reorder(v[k], order) for _, k in keys}


def instance_text(schema, data):
    order = {}
    collect_order(schema, order)
    return json.dumps(reorder(data, order), separators=(",", ":"), ensure_ascii=False)


def pct(xs):
    if not xs:
        return "n=0"
    s = sorted(xs)
    return "p50 %.2f p99 %.2f mean %.2f (n=%d)" % (
        s[len(s) // 2], s[min(len(s) - 1, len(s) * 99 // 100)], statistics.fmean(s), len(s))


class XGrammarEngine:
    name = "xgrammar"

    def __init__(self, hf_tok, vocab_size):
        import xgrammar as xgr
        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(hf_tok, vocab_size=vocab_size)
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, self.info.vocab_size)

    def compile(self, schema_str):
        return self.compiler.compile_json_schema(schema_str, any_whitespace=True, strict_mode=False)

    def matcher(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, m):
        m.fill_next_token_bitmask(self.bitmask)

    def accept(self, m, tid):
        return m.accept_token(tid)

    def terminated(self, m, eos):
        return m.accept_token(eos) and m.is_terminated()


class LLGuidanceEngine:
    name = "llguidance"

    def __init__(self, hf_tok, vocab_size):
        import llguidance
        import llguidance.hf
        import llguidance.numpy
        self.ll = llguidance
        self.np = llguidance.numpy
        self.tok = llguidance.hf.from_tokenizer(hf_tok, n_vocab=vocab_size)
        self.bitmask = self.np.allocate_token_bitmask(1, self.tok.vocab_size)

    def compile(self, schema_str):
        grammar = self.ll.LLMatcher.grammar_from_json_schema(
            schema_str, defaults={"whitespace_flexible": True})
        ok, err = self.ll.LLMatcher.validate_grammar(grammar, self.tok), None
        if isinstance(ok, tuple):
            ok, err = ok
        m = self.ll.LLMatcher(self.tok, grammar)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return grammar

    def matcher(self, grammar):
        return self.ll.LLMatcher(self.tok, grammar)

    def fill(self, m):
        self.np.fill_next_token_bitmask(m, self.bitmask, 0)

    def accept(self, m, tid):
        return m.consume_token(tid) and not m.is_error()

    def terminated(self, m, eos):
        return m.is_accepting()


def run(engine, files, data_dir, hf_tok, eos, step_ms=0.0, prefill_ms=0.0):
    compile_ms, mask_us = [], []
    counts = dict(schemas=0, compiled=0, refused=0, valid=0, invalid=0, wrong_rej=0, wrong_acc=0)
    for name in files:
        with open(os.path.join(data_dir, name)) as f:
            doc = json.load(f)
        counts["schemas"] += 1
        schema_str = json.dumps(doc["schema"])
        t0 = time.perf_counter()
        try:
            compiled = engine.compile(schema_str)
        except Exception:  # refused or failed: counted, not fatal
            compile_ms.append((time.perf_counter() - t0) * 1e3)
            counts["refused"] += 1
            continue
        compile_ms.append((time.perf_counter() - t0) * 1e3)
        counts["compiled"] += 1
        if prefill_ms > 0:
            time.sleep(prefill_ms / 1e3)  # the request's prefill, as --prefill-ms in DeepInfer
        for t in doc.get("tests", []):
            valid = bool(t.get("valid"))
            counts["valid" if valid else "invalid"] += 1
            ids = hf_tok.encode(instance_text(doc["schema"], t["data"]), add_special_tokens=False)
            m = engine.matcher(compiled)
            ok = True
            for tid in ids:
                if step_ms > 0 and valid:
                    time.sleep(step_ms / 1e3)  # a decode step's forward pass, as --step-ms in DeepInfer
                m0 = time.perf_counter()
                engine.fill(m)
                if valid:
                    mask_us.append((time.perf_counter() - m0) * 1e6)
                if not engine.accept(m, tid):
                    ok = False
                    break
            ok = ok and engine.terminated(m, eos)
            if valid and not ok:
                counts["wrong_rej"] += 1
            if not valid and ok:
                counts["wrong_acc"] += 1
    print("== %s" % engine.name)
    print("  " + " ".join("%s=%d" % kv for kv in counts.items()))
    print("  compile ms: " + pct(compile_ms))
    print("  mask us/token: " + pct(mask_us))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--engines", default="xgrammar,llguidance")
    ap.add_argument("--step-ms", type=float, default=0.0,
                    help="sleep before each mask of a valid instance (a stand-in for the forward pass)")
    ap.add_argument("--prefill-ms", type=float, default=0.0,
                    help="sleep once between compile and the first mask (a stand-in for the prefill)")
    args = ap.parse_args()
    from transformers import AutoTokenizer
    hf_tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(args.gguf)),
                                           gguf_file=os.path.basename(args.gguf))
    vocab_size = len(hf_tok)
    eos = hf_tok.eos_token_id
    files = sorted(f for f in os.listdir(args.data))[::max(1, args.stride)]
    if args.limit:
        files = files[:args.limit]
    for name in args.engines.split(","):
        engine = {"xgrammar": XGrammarEngine, "llguidance": LLGuidanceEngine}[name](hf_tok, vocab_size)
        run(engine, files, args.data, hf_tok, eos, args.step_ms, args.prefill_ms)


if __name__ == "__main__":
    main()
