# Makes a tiny random DeepSeek-V4.1-Flash checkpoint (model_type deepseek_v41) and its reference
# outputs from tests/reference/deepseek_v41_reference.py (float32, on the dequantized weights).
# Run from the repo root with PyPI torch + transformers (>= 5.8, for the V4 classes it reuses):
#   python3 tests/reference/make_tiny_deepseek_v41.py
# The config is V4.1-Flash's shape scaled down (vocabulary 128, as the V4 tiny fixtures):
#   8 layers, compress_ratios [0,0,2,2,2,1,1,1] (real: [0,0]+[2]*18+[1]*20), KV sources [2,5]
#   (real [2,8,14,20]), index sources [2,5,7] (real [2,8,14,20,24,...,36]), candidate source 5
#   (real 20) keeping the best 2 blocks of 2 entries (real 2048 of 8), index_topk 3 (real 512),
#   window 4 (real 128), Engram at layers [1,4] (real [1,14]) with 2..4-grams, 2 hash heads of 8
#   (real 4-grams too), hc_mult 2 (real 4), rms_norm_eps 1e-20 and a gate_temp, no hash layers.
# Storage as V4.1-Flash: DeepSeek's names; FP8 e4m3 with a ue8m0 scale per 32x32 block for the
# attention projections (wq_a, wq_b, wkv, wo_a, wo_b, indexer.wq_b, indexer.wk), the shared
# experts and engram.wkv (q_lora_rank 48 gives partial blocks); routed experts FP4 e2m1 with a
# ue8m0 scale per 32 inputs; the rest bf16. The Engram hash layout goes to engram_hash.json.
# expected.json per prompt: logits at every position, the greedy continuation (each step a full
# forward over prompt + continuation: the reference has no cache) with its logits and top-2
# margins, and the Engram table rows of every position (for the C++ hash test); for the longest
# prompt also every index source's visible scores, candidate mask and picks (selection test); for
# the 13-token prompt the streams entering and leaving each Engram layer (Engram test); for the
# 5-token prompt the mHC sites and router choices of layers 0, 1, 2 and the last (mHC, router tests).
import json
import math
import os
import re
import sys

import numpy as np
import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from deepseek_v41_reference import DeepseekV41Reference, engram_multipliers, engram_rows  # noqa: E402
from make_tiny_deepseek_v4 import PROMPTS, quantize_fp4_ue8m0  # noqa: E402

OUT = os.path.join(HERE, "fixtures", "deepseek_v41", "tiny")
GREEDY_STEPS = 8
FP8_BLOCK = 32
TEXT = dict(
    vocab_size=128, hidden_size=32, num_hidden_layers=8, num_attention_heads=4, head_dim=32, qk_rope_head_dim=8,
    q_lora_rank=48, o_groups=2, o_lora_rank=16, sliding_window=4, max_position_embeddings=512,
    compress_ratios=[0, 0, 2, 2, 2, 1, 1, 1], kv_source_layer_ids=[2, 5], index_source_layer_ids=[2, 5, 7],
    candidate_source_layer_id=5, candidate_topk_blocks=2, candidate_block_size=2,
    index_n_heads=8, index_head_dim=16, index_topk=3,
    n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, moe_intermediate_size=32,
    scoring_func="sqrtsoftplus", routed_scaling_factor=1.5, gate_temp=1.7, swiglu_limit=1.5, num_hash_layers=0,
    hc_mult=2, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-20,
    rope_theta=10000.0, compress_rope_theta=160000.0,
    rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128, "beta_fast": 32.0,
                  "beta_slow": 1.0},
    engram_layer_ids=[1, 4], engram_max_ngram_size=4, engram_n_heads=2, engram_head_dim=8,
    engram_vocab_size=[29, 37, 41], engram_pad_token_id=2, engram_seed=0,
    num_nextn_predict_layers=0, bos_token_id=0, eos_token_id=1, tie_word_embeddings=False)

FP8_LINEAR = re.compile(r"\.attn\.(wq_a|wq_b|wkv|wo_a|wo_b|indexer\.wq_b|indexer\.wk)\.weight$|"
                        r"\.ffn\.shared_experts\.w[123]\.weight$|\.engram\.wkv\.weight$")
FP4_EXPERT = re.compile(r"\.ffn\.experts\.\d+\.w[123]\.weight$")


def token_map(vocab):
    """The tiny model's normalized ids: ids 64.. fold onto id - 32 when even (as a tokenizer's
    case / accent folding merges ids), then renumbered densely. Real checkpoints derive it from
    the tokenizer (DeepSeek's CompressedTokenizer)."""
    key = [i - 32 if i >= 64 and i % 2 == 0 else i for i in range(vocab)]
    dense = {k: n for n, k in enumerate(sorted(set(key)))}
    return [dense[k] for k in key], len(dense)


def hash_layout():
    tmap, n = token_map(TEXT["vocab_size"])
    mult = engram_multipliers(TEXT, n)
    return {"token_map": tmap, "pad_id": tmap[TEXT["engram_pad_token_id"]],
            "multipliers": {str(k): [str(int(m)) for m in v] for k, v in mult.items()}}


def quantize_fp8_blocks(w, block):
    """Per block x block: scale = 2^ceil(log2(amax / 448)) (ue8m0), q = e4m3(w / scale)."""
    n_out, n_in = w.shape
    bo, bi = -(-n_out // block), -(-n_in // block)
    padded = torch.zeros(bo * block, bi * block)
    padded[:n_out, :n_in] = w
    blocks = padded.view(bo, block, bi, block)
    scale = torch.exp2(torch.ceil(torch.log2(blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / 448.0)))
    q = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn)
    deq = (q.float() * scale[:, None, :, None]).view(bo * block, bi * block)[:n_out, :n_in]
    q = q.view(bo * block, bi * block)[:n_out, :n_in].contiguous()
    return q, scale.to(torch.float8_e8m0fnu).contiguous(), deq.contiguous()


def fill(name, p, g):
    if name.endswith("norm.weight") or name.endswith(("q_weight", "k_weight")):
        p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
    elif name.endswith((".base", "gate.bias")):
        p.copy_(0.3 * torch.randn(p.shape, generator=g))
    elif name.endswith(".scale"):
        p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
    elif name.endswith(".fn"):
        p.copy_(0.15 * torch.randn(p.shape, generator=g))
    elif name.endswith("attn_sink"):
        p.copy_(0.5 * torch.randn(p.shape, generator=g))
    elif name.endswith(("gate.weight", "engram.embed.weight", "engram.wkv.weight")):
        p.copy_(0.3 * torch.randn(p.shape, generator=g))
    else:
        p.copy_(0.15 * torch.randn(p.shape, generator=g))


# Reference module names -> DeepSeek's checkpoint names (the module names not listed are already
# DeepSeek's). Expert tensors are split separately (transformers stacks them).
RENAMES = [(r"^layers\.(\d+)\.hc_(attn|ffn)\.(fn|base|scale)$", r"layers.\1.hc_\2_\3"),
           (r"\.attn\.wo_a\.weight$", ".attn.wo_a.weight"),
           (r"\.ffn\.shared_experts\.gate_proj\.", ".ffn.shared_experts.w1."),
           (r"\.ffn\.shared_experts\.up_proj\.", ".ffn.shared_experts.w3."),
           (r"\.ffn\.shared_experts\.down_proj\.", ".ffn.shared_experts.w2."),
           (r"\.attn\.compressor\.norm\.weight$", ".attn.compressor.norm.weight")]


def deepseek_tensors(model):
    out = {}
    for k, v in model.state_dict().items():
        v = v.detach().float()
        if k.endswith("experts.gate_up_proj"):
            prefix, inter = k[: -len("gate_up_proj")], v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{prefix}{e}.w1.weight"], out[f"{prefix}{e}.w3.weight"] = v[e, :inter], v[e, inter:]
            continue
        if k.endswith("experts.down_proj"):
            prefix = k[: -len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{prefix}{e}.w2.weight"] = v[e]
            continue
        for pattern, repl in RENAMES:
            k = re.sub(pattern, repl, k)
        out[k] = v
    return out


def load_dequantized(model, deq):
    """Puts the dequantized DeepSeek-named tensors back into the reference module."""
    sd = model.state_dict()
    for k in sd:
        if k.endswith("experts.gate_up_proj"):
            prefix = k[: -len("gate_up_proj")]
            sd[k] = torch.stack([torch.cat([deq[f"{prefix}{e}.w1.weight"], deq[f"{prefix}{e}.w3.weight"]])
                                 for e in range(sd[k].shape[0])])
        elif k.endswith("experts.down_proj"):
            prefix = k[: -len("down_proj")]
            sd[k] = torch.stack([deq[f"{prefix}{e}.w2.weight"] for e in range(sd[k].shape[0])])
        else:
            name = k
            for pattern, repl in RENAMES:
                name = re.sub(pattern, repl, name)
            sd[k] = deq[name]
    model.load_state_dict(sd)


class SelectionGaps:
    """The smallest margin at every top-k / candidate-block boundary over a forward (ties there
    would make the reference depend on torch.topk's tie order)."""

    def __init__(self, tc):
        self.tc, self.min_gap = tc, float("inf")

    def __call__(self, name, v):
        if not name.endswith("index_scores"):
            return
        k = self.tc["index_topk"]
        for row in v:
            finite = row[torch.isfinite(row)].sort(descending=True).values
            if len(finite) > k:
                self.min_gap = min(self.min_gap, float(finite[k - 1] - finite[k]))


def rounded(rows):
    return [[round(float(v), 5) for v in row] for row in rows]


def build(seed):
    """The model for `seed` with its weights rounded to bf16 / FP8 / FP4 as stored; returns the
    module (running on the dequantized values) and the tensors to store."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = DeepseekV41Reference(TEXT, hash_layout()).eval()
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            fill(name, p, g)
    tensors = {k: v.to(torch.bfloat16).float() for k, v in deepseek_tensors(model).items()}
    stored, deq = {}, {}
    for k, v in tensors.items():
        if FP8_LINEAR.search(k):
            q, scale, d = quantize_fp8_blocks(v, FP8_BLOCK)
        elif FP4_EXPERT.search(k):
            q, scale, d = quantize_fp4_ue8m0(v)
        else:
            stored[k], deq[k] = v.to(torch.bfloat16), v
            continue
        stored[k], stored[k[: -len(".weight")] + ".scale"], deq[k] = q, scale, d
    load_dequantized(model, deq)
    return model, stored


class Selections:
    """Index sources' inputs and outputs of the top-k selection (for the C++ selection test): the
    visible scores before the candidate mask, the candidate mask, the picked entries."""

    def __init__(self, inner):
        self.inner, self.got = inner, {}

    def __call__(self, name, v):
        self.inner(name, v)
        if name.endswith(("index_scores", "candidates", "topk")):
            layer, what = name.split(".")[1], name.split(".")[-1]
            if what == "index_scores":
                v = [[None if not math.isfinite(x) else round(float(x), 6) for x in row] for row in v]
            else:
                v = [[int(i) for i in row.nonzero().flatten()] for row in v]
            self.got.setdefault(layer, {})[what] = v


class EngramStreams:
    """The streams entering and leaving each Engram layer (for the C++ Engram test): the previous
    layer's output and the streams after the Engram update, [T, hc, hidden]."""

    def __init__(self, inner, layers):
        self.inner, self.got = inner, {}
        self.before = {f"layers.{i - 1}.layer_out": str(i) for i in layers}

    def __call__(self, name, v):
        self.inner(name, v)
        if name in self.before:
            self.got.setdefault(self.before[name], {})["before"] = v.flatten(1).tolist()
        elif name.endswith("after_engram"):
            self.got.setdefault(name.split(".")[1], {})["after"] = v.flatten(1).tolist()


class SiteTensors:
    """The mHC sites of a few layers (for the C++ mHC, MoE and compressor tests): streams in, the
    attention and FFN sublayer inputs and results, the streams after each expansion; at the KV
    sources also the compressed entries (rotated) and, at index sources among them, the index keys."""

    NAMES = ("hc_in", "attn_in", "attn_result", "after_attn", "ffn_in", "ffn_result", "layer_out", "router_idx",
             "router_weights", "compressed", "index_keys")

    def __init__(self, inner, layers):
        self.inner, self.layers, self.got = inner, {str(i) for i in layers}, {}

    def __call__(self, name, v):
        self.inner(name, v)
        parts = name.split(".")
        if len(parts) == 3 and parts[1] in self.layers and parts[2] in self.NAMES:
            self.got.setdefault(parts[1], {})[parts[2]] = [[round(x, 5) for x in row]
                                                           for row in v.flatten(1).tolist()]


def run_cases(model, trace):
    cases = []
    with torch.no_grad():
        for n, ids in enumerate(PROMPTS):
            selections = Selections(trace)
            streams = EngramStreams(trace, TEXT["engram_layer_ids"])
            sites = SiteTensors(trace, [0, 1, 2, 5, TEXT["num_hidden_layers"] - 1])
            full = model(ids, trace=selections if n == len(PROMPTS) - 1 else streams if n == 1 else sites)
            greedy, step_logits = [], []
            for _ in range(GREEDY_STEPS):
                last = model(ids + greedy, trace=trace)[-1]
                step_logits.append(last)
                greedy.append(int(last.argmax()))
            step_logits = torch.stack(step_logits)
            assert int(full[-1].argmax()) == greedy[0]
            margins = [round(float(v[0] - v[1]), 5) for v in (torch.topk(l, 2).values for l in step_logits)]
            rows = {str(layer): engram_rows(TEXT, model.hash_layout, ids, layer).tolist()
                    for layer in TEXT["engram_layer_ids"]}
            cases.append({"ids": ids, "logits": rounded(full), "greedy": greedy,
                          "greedy_logits": rounded(step_logits), "greedy_margin": margins, "engram_rows": rows})
            if selections.got:
                cases[-1]["selections"] = selections.got
            if sites.got:
                cases[-1]["hc_sites"] = sites.got
            if streams.got:
                cases[-1]["engram_streams"] = {k: {w: [[round(x, 6) for x in row] for row in rows]
                                                   for w, rows in v.items()} for k, v in streams.got.items()}
    return cases


def main():
    # The first seed from 7100 whose indexer top-k boundaries are clear of rounding in every
    # forward (prompts and greedy continuations).
    for seed in range(7100, 7200):
        model, stored = build(seed)
        gaps = SelectionGaps(TEXT)
        cases = run_cases(model, gaps)
        print("seed", seed, "min top-k gap", gaps.min_gap, flush=True)
        if gaps.min_gap > 1e-4:
            break
    else:
        raise SystemExit("no seed without an indexer top-k tie")
    os.makedirs(OUT, exist_ok=True)
    save_file(stored, os.path.join(OUT, "model.safetensors"), metadata={"format": "pt"})
    config = {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
              "text_config": dict(TEXT, model_type="deepseek_v41_text"),
              "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                      "scale_fmt": "ue8m0", "weight_block_size": [FP8_BLOCK, FP8_BLOCK]},
              "expert_dtype": "fp4"}
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(OUT, "engram_hash.json"), "w") as f:
        json.dump(model.hash_layout, f, separators=(",", ":"))
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"model": "deepseek_v41_tiny", "seed": seed, "cases": cases}, f, separators=(",", ":"))
    print("weights", os.path.getsize(os.path.join(OUT, "model.safetensors")), "bytes; min greedy margin",
          min(min(c["greedy_margin"]) for c in cases))


if __name__ == "__main__":
    main()
