# Makes tiny random DeepSeek-V4 checkpoints (config.json + model.safetensors) and their reference
# outputs, for tests/unit/deepseek_v4. The reference is transformers' DeepseekV4ForCausalLM
# (>= 5.8; it has no FP8/FP4 fake-quantisation and no Hadamard rotation), run in float32 on the
# saved weights. Run from the repo root, in an environment with PyPI torch + transformers:
#   python3 tests/reference/make_tiny_deepseek_v4.py [fixture names, default all]
# Cases (every one mixes window-only, HCA and CSA layers, hash-routed and top-k MoE layers):
#   h2_mixed:   hc_mult 2, window 4 (smaller than every prompt), HCA ratio 8, CSA ratio 4,
#               index_topk 3 (fewer than the CSA entries of the longer prompts), YaRN on the
#               compressed layers, 2 hash layers. Written by save_pretrained (transformers'
#               on-disk names: "model." prefix, DeepSeek leaf names).
#   h4_deepseek: hc_mult 4, window 8, HCA ratio 16, CSA ratio 4, no YaRN, 1 hash layer.
#               Written with DeepSeek's own checkpoint names (embed.weight, layers.N.attn.wq_a,
#               hc_head_fn, ...), as the official repository ships them.
#   h2_hfnames: hc_mult 2, window 6, CSA first; written with transformers' in-memory names
#               (model.layers.N.self_attn.q_a_proj, stacked mlp.experts.gate_up_proj, ...).
#   fp8_ue8m0:  DeepSeek's FP8 layout with DeepSeek's names: attention projections (wq_a, wq_b,
#               wkv, wo_a, wo_b, indexer.wq_b) and all experts are float8_e4m3fn with a ue8m0
#               (F8_E8M0, power-of-two) `.scale` per 128x128 block; compressor/indexer
#               projections, router, norms, embedding and head stay bf16. Sizes above 128
#               (hidden 160, q_lora_rank 136, o_lora_rank 128) give full and partial blocks.
#               Its reference is transformers run on the dequantized weights (fp8 * scale).
#   fp4_e2m1:   V4-Flash Instruct's layout with DeepSeek's names and config ("expert_dtype": "fp4"
#               at the top level): routed experts FP4 e2m1 packed two per byte as int8 (low
#               nibble = even input) with a ue8m0 (F8_E8M0) `.scale` [n_out, n_in / 32];
#               attention projections but wo_a and the shared experts FP8 as in fp8_ue8m0.
#               Its reference is transformers run on the dequantized weights (e2m1 * scale).
# expected.json per case: token ids, logits at every prompt position (one full forward), and
# the greedy continuation (transformers' incremental decoding through V4's own cache) with
# the logits and top-2 margin of each step. The script checks that the full-forward logits of
# prompt + continuation agree with the incremental step logits, so the two reference paths agree.
import json
import os
import re
import sys

import torch
from safetensors.torch import load_file, save_file
import torch.nn.functional as F
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.masking_utils import create_sliding_window_causal_mask
from transformers.cache_utils import DynamicCache

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_ROOT = os.path.join(HERE, "fixtures", "deepseek_v4")
PROMPTS = [
    [5, 17, 42, 99, 3],
    [100, 3, 3, 3, 99, 120, 7, 64, 31, 50, 11, 5, 77],
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 100, 110, 120, 125, 127, 126, 60, 30, 15, 88, 44, 22, 11, 66, 33,
     90, 45, 12, 6, 3, 81, 27, 9, 101, 102, 103, 104],
]
GREEDY_STEPS = 8
COMMON = dict(vocab_size=128, hidden_size=32, moe_intermediate_size=16, num_attention_heads=4,
              num_key_value_heads=1, head_dim=16, q_lora_rank=16, num_experts_per_tok=2,
              n_routed_experts=4, n_shared_experts=1, o_groups=2, o_lora_rank=8, index_n_heads=8,
              index_head_dim=16, partial_rotary_factor=0.5, max_position_embeddings=512,
              rms_norm_eps=1e-6, swiglu_limit=1.5, routed_scaling_factor=1.5, bos_token_id=0,
              eos_token_id=1, tie_word_embeddings=False, num_nextn_predict_layers=0)
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128, "beta_fast": 32.0,
        "beta_slow": 1.0}
CASES = {
    "h2_mixed": (dict(COMMON, num_hidden_layers=4, hc_mult=2, sliding_window=4, index_topk=3,
                      layer_types=["sliding_attention", "heavily_compressed_attention",
                                   "compressed_sparse_attention", "heavily_compressed_attention"],
                      compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                      mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe"], rope_parameters=YARN),
                 "save_pretrained"),
    "h4_deepseek": (dict(COMMON, num_hidden_layers=3, hc_mult=4, sliding_window=8, index_topk=4,
                         layer_types=["compressed_sparse_attention", "heavily_compressed_attention",
                                      "sliding_attention"],
                         compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
                         mlp_layer_types=["hash_moe", "moe", "moe"]),
                    "deepseek"),
    "h2_hfnames": (dict(COMMON, num_hidden_layers=2, hc_mult=2, sliding_window=6, index_topk=2,
                        layer_types=["compressed_sparse_attention", "heavily_compressed_attention"],
                        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                        mlp_layer_types=["moe", "moe"], rope_parameters=YARN),
                   "transformers"),
}


def fill(name, p, g):
    # HF's init (std 0.02, zero sinks/biases, unit scales) gives near-zero logits and routing
    # ties: draw everything at scales that keep the logits and the expert choices informative.
    if name.endswith("tid2eid"):
        n_exp = COMMON["n_routed_experts"]
        rows = [torch.randperm(n_exp, generator=g)[: p.shape[1]] for _ in range(p.shape[0])]
        p.copy_(torch.stack(rows))
    elif name.endswith("norm.weight"):
        p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
    elif name.endswith(("e_score_correction_bias", ".base", "hc_base")):
        p.copy_(0.3 * torch.randn(p.shape, generator=g))
    elif name.endswith((".scale", "hc_scale")):
        p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
    elif name.endswith((".fn", "hc_fn")):
        p.copy_(0.15 * torch.randn(p.shape, generator=g))
    elif name.endswith(("sinks", "position_bias")):
        p.copy_(0.5 * torch.randn(p.shape, generator=g))
    elif name.endswith("gate.weight"):
        p.copy_(0.3 * torch.randn(p.shape, generator=g))
    else:
        p.copy_(0.15 * torch.randn(p.shape, generator=g))


def randomize(model, g):
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            fill(name, p, g)
        for name, b in sorted(model.named_buffers()):
            if name.endswith(("e_score_correction_bias", "tid2eid")):
                fill(name, b, g)


# transformers' on-disk name (save_pretrained) -> DeepSeek's own checkpoint name.
def deepseek_name(k):
    k = {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "norm.weight",
         "model.hc_head.hc_fn": "hc_head_fn", "model.hc_head.hc_base": "hc_head_base",
         "model.hc_head.hc_scale": "hc_head_scale"}.get(k, k)
    return k[len("model."):] if k.startswith("model.") else k


def rounded(rows):
    return [[round(float(v), 5) for v in row] for row in rows]


def greedy_with_cache(ref, ids):
    # transformers' own incremental path: prefill the prompt into V4's cache (window ring,
    # compressor buffers and overlap state, compressed entries), then one token per forward.
    # Not model.generate: in transformers 5.24 its V4 continuations disagree with the model's
    # own forward (by up to ~1 in logits on prompts longer than the window), while this loop
    # agrees with a full forward to ~1e-6 (checked below for every case).
    cache = DynamicCache(config=ref.config)
    logits = ref(torch.tensor([ids]), cache=cache, use_cache=True).logits[0, -1]
    greedy, rows = [], []
    for step in range(GREEDY_STEPS):
        rows.append(logits)
        greedy.append(int(logits.argmax()))
        pos = torch.tensor([[len(ids) + step]])
        logits = ref(torch.tensor([[greedy[-1]]]), cache=cache, use_cache=True, position_ids=pos).logits[0, -1]
    return greedy, torch.stack(rows)


class IndexGaps:
    """Watches the Lightning indexer's scores in a full forward (positions 0..S-1): the gap between
    the k-th and (k+1)-th best visible entry of every query. ReLU scores tie at 0 easily, and a
    tie at the top-k boundary makes the reference itself depend on torch.topk's tie order (it
    changes with the number of entries), so fixtures must keep this gap clear of rounding."""

    def __init__(self, ref):
        self.min_gap = float("inf")
        cfg = ref.config
        self.ratio, self.k = cfg.compress_rates["compressed_sparse_attention"], cfg.index_topk
        for layer in ref.model.layers:
            comp = layer.self_attn.compressor
            if comp is not None and hasattr(comp, "indexer"):
                comp.indexer.scorer.register_forward_hook(self.hook)

    def hook(self, module, args, scores):
        for s in range(scores.shape[1]):
            visible = min((s + 1) // self.ratio, scores.shape[2])
            if visible > self.k:
                top = torch.topk(scores[0, s, :visible], self.k + 1).values
                self.min_gap = min(self.min_gap, float(top[self.k - 1] - top[self.k]))


def write_expected(out, name, ref, mtp_ref=None):
    cases = []
    gaps = IndexGaps(ref)
    with torch.no_grad():
        for ids in PROMPTS:
            full = ref(torch.tensor([ids]), use_cache=False).logits[0]
            assert gaps.min_gap > 1e-4, f"{name}: indexer top-k tie (gap {gaps.min_gap}); change the seed"
            greedy, step_logits = greedy_with_cache(ref, ids)
            margins = [round(float(v[0] - v[1]), 5) for v in (torch.topk(l, 2).values for l in step_logits)]
            # The two reference paths agree: a full forward over prompt + continuation.
            again = ref(torch.tensor([ids + greedy]), use_cache=False).logits[0, len(ids) - 1: -1]
            worst = float((again - step_logits).abs().max())
            assert worst < 1e-3, f"{name}: generate and full forward disagree by {worst}"
            assert int(full[-1].argmax()) == greedy[0]
            case = {"ids": ids, "logits": rounded(full), "greedy": greedy,
                    "greedy_logits": rounded(step_logits), "greedy_margin": margins}
            if mtp_ref is not None:
                draft = mtp_logits(ref, *mtp_ref, ids)
                case["mtp_logits"] = rounded(draft)
                case["mtp_margin"] = [round(float(v[0] - v[1]), 5) for v in torch.topk(draft, 2).values]
            cases.append(case)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"model": name, "cases": cases}, f, separators=(",", ":"))


def build(name, params, naming, seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    cfg = DeepseekV4Config(**params)
    model = DeepseekV4ForCausalLM(cfg).eval()
    randomize(model, g)
    out = os.path.join(OUT_ROOT, name)
    os.makedirs(out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out)
    gen_cfg = os.path.join(out, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)
    st_path = os.path.join(out, "model.safetensors")
    # Reference: what was saved, reloaded in float32.
    ref = DeepseekV4ForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    if naming == "deepseek":
        sd = load_file(st_path)
        save_file({deepseek_name(k): v for k, v in sd.items()}, st_path, metadata={"format": "pt"})
    elif naming == "transformers":
        sd = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in ref.state_dict().items()}
        save_file(sd, st_path, metadata={"format": "pt"})
    write_expected(out, name, ref)
    print(name, "weights", os.path.getsize(st_path), "bytes")


FP8_CASE = dict(COMMON, hidden_size=160, moe_intermediate_size=32, head_dim=32, q_lora_rank=136,
                o_lora_rank=128, index_head_dim=32, index_n_heads=4, num_hidden_layers=3, hc_mult=2,
                sliding_window=6, index_topk=3,
                layer_types=["compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"],
                compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                mlp_layer_types=["hash_moe", "moe", "moe"], rope_parameters=YARN)
FP8_BLOCK = 128
FP8_LINEAR = re.compile(r"\.attn\.(wq_a|wq_b|wkv|wo_a|wo_b|indexer\.wq_b)\.weight$|"
                        r"\.ffn\.(experts\.\d+|shared_experts)\.w[123]\.weight$")


def quantize_fp8_ue8m0(w):
    """Per 128x128 block: scale = 2^ceil(log2(amax / 448)) (a ue8m0 power of two), q = w / scale."""
    n_out, n_in = w.shape
    bo, bi = -(-n_out // FP8_BLOCK), -(-n_in // FP8_BLOCK)
    padded = torch.zeros(bo * FP8_BLOCK, bi * FP8_BLOCK)
    padded[:n_out, :n_in] = w
    blocks = padded.view(bo, FP8_BLOCK, bi, FP8_BLOCK)
    amax = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12)
    scale = torch.exp2(torch.ceil(torch.log2(amax / 448.0)))
    q = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn)
    deq = (q.float() * scale[:, None, :, None]).view(bo * FP8_BLOCK, bi * FP8_BLOCK)[:n_out, :n_in]
    q = q.view(bo * FP8_BLOCK, bi * FP8_BLOCK)[:n_out, :n_in].contiguous()
    return q, scale.to(torch.float8_e8m0fnu).contiguous(), deq.contiguous()


FP4_CASE = dict(COMMON, hidden_size=64, moe_intermediate_size=32, q_lora_rank=32, num_hidden_layers=3,
                num_nextn_predict_layers=1,
                hc_mult=2, sliding_window=6, index_topk=3,
                layer_types=["compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"],
                compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                mlp_layer_types=["hash_moe", "moe", "moe"], rope_parameters=YARN)
# V4-Flash Instruct's layout: routed experts FP4, attention projections (but wo_a: its 8-row
# o_lora groups cannot hold 128-row FP8 blocks at this size) and shared experts FP8.
FP4_EXPERT = re.compile(r"\.ffn\.experts\.\d+\.w[123]\.weight$")
FP8_WITH_FP4 = re.compile(r"\.attn\.(wq_a|wq_b|wkv|wo_b|indexer\.wq_b)\.weight$|"
                          r"\.ffn\.shared_experts\.w[123]\.weight$|^mtp\.0\.[eh]_proj\.weight$")
FP4_BLOCK = 32
# MTPBlock's tensors outside its decoder block.
MTP_OWN = ("e_proj.weight", "e_proj.scale", "h_proj.weight", "h_proj.scale", "enorm.weight", "hnorm.weight",
           "norm.weight", "hc_head_fn", "hc_head_base", "hc_head_scale")
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def quantize_fp4_ue8m0(w):
    """Per 32 inputs: scale = 2^ceil(log2(amax / 6)) (ue8m0), codes = nearest e2m1 of w / scale,
    packed two per byte (low nibble = even input, bit 3 = sign) as int8, DeepSeek's storage."""
    n_out, n_in = w.shape
    assert n_in % FP4_BLOCK == 0
    blocks = w.view(n_out, n_in // FP4_BLOCK, FP4_BLOCK)
    amax = blocks.abs().amax(dim=2).clamp(min=1e-12)
    scale = torch.exp2(torch.ceil(torch.log2(amax / 6.0)))
    x = blocks / scale[:, :, None]
    mag = (x.abs()[..., None] - E2M1).abs().argmin(dim=-1)
    codes = (mag | ((x < 0) & (mag > 0)).to(torch.long) * 8).view(n_out, n_in)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8).view(torch.int8).contiguous()
    vals = torch.where(codes >= 8, -E2M1[codes % 8], E2M1[codes % 8])
    deq = (vals.view(n_out, n_in // FP4_BLOCK, FP4_BLOCK) * scale[:, :, None]).view(n_out, n_in)
    return packed, scale.to(torch.float8_e8m0fnu).contiguous(), deq.contiguous()


def with_mtp_layer(params):
    """The config plus one layer: the MTP block's decoder part (DeepSeek's MTPBlock is a Block with
    layer id num_layers: window-only attention, top-k MoE), made and saved by transformers."""
    return dict(params, num_hidden_layers=params["num_hidden_layers"] + 1,
                layer_types=params["layer_types"] + ["sliding_attention"],
                mlp_layer_types=params["mlp_layer_types"] + ["moe"])


def mtp_extras(params, g):
    """MTPBlock's own tensors beyond the decoder block (DeepSeek's names, bf16)."""
    H, hc = params["hidden_size"], params["hc_mult"]
    r = lambda *shape: torch.randn(shape, generator=g)
    t = {"e_proj.weight": 0.15 * r(H, H), "h_proj.weight": 0.15 * r(H, H), "enorm.weight": 1 + 0.2 * r(H),
         "hnorm.weight": 1 + 0.2 * r(H), "norm.weight": 1 + 0.2 * r(H), "hc_head_fn": 0.15 * r(hc, hc * H),
         "hc_head_base": 0.3 * r(hc), "hc_head_scale": 1 + 0.3 * r(1)}
    return {"mtp.0." + k: v.to(torch.bfloat16) for k, v in t.items()}


def mtp_logits(ref, block, extras, ids):
    """DeepSeek-V4's MTPBlock.forward (DeepSeek's inference/model.py, as its published
    descriptions give it; transformers has no MTP module) on the main model's final streams:
    e = enorm(embed(ids[1:])); x = e_proj(e) (broadcast over streams) + h_proj(hnorm(streams at
    0..S-2)); x = the decoder block (transformers' DeepseekV4DecoderLayer holding mtp.0's block
    weights, layer type sliding_attention / moe); logits = head(norm(hc_head(x))) with the MTP's
    own hc_head_{fn,base,scale} (pre = sigmoid(mixes * scale + base) + hc_eps over rms-normed
    flat streams, as transformers' DeepseekV4HyperHead) and norm, the main embedding and head.
    Row i: the logits of token i + 2."""
    cfg = block.self_attn.config
    eps = cfg.rms_norm_eps
    got = {}
    hook = ref.model.hc_head.register_forward_hook(lambda mod, args, out: got.setdefault("x", args[0]))
    ref(torch.tensor([ids]), use_cache=False)
    hook.remove()
    streams = got["x"][:, :-1]
    nxt, pos = torch.tensor([ids[1:]]), torch.arange(len(ids) - 1)[None]

    def rms(x, w=None):
        x = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        return x if w is None else x * w

    e = rms(ref.model.embed_tokens(nxt), extras["enorm.weight"])
    x = F.linear(e, extras["e_proj.weight"]).unsqueeze(2) + \
        F.linear(rms(streams, extras["hnorm.weight"]), extras["h_proj.weight"])
    pe = {k: ref.model.rotary_emb(e, position_ids=pos, layer_type=k) for k in ("main", "compress")}
    mask = create_sliding_window_causal_mask(config=cfg, inputs_embeds=e, attention_mask=None, cache=None,
                                             position_ids=pos)
    x = block(x, position_embeddings=pe, position_ids=pos, attention_mask=mask, input_ids=nxt, cache=None)
    mixes = F.linear(rms(x.flatten(2)), extras["hc_head_fn"])
    pre = torch.sigmoid(mixes * extras["hc_head_scale"] + extras["hc_head_base"]) + cfg.hc_eps
    y = (pre.unsqueeze(-1) * x).sum(dim=2)
    return ref.lm_head(rms(y, extras["norm.weight"]))[0]


def build_quantized(name, params, seed, rules, extra_config, mtp=False):
    """DeepSeek's names; tensors matching a rule's regex stored quantized (weight + `.scale`), the
    reference run on their dequantized values. mtp: also an MTP block (mtp.0.*) and its draft
    logits (mtp_logits) in expected.json."""
    import tempfile
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = DeepseekV4ForCausalLM(DeepseekV4Config(**(with_mtp_layer(params) if mtp else params))).eval()
    randomize(model, g)
    out = os.path.join(OUT_ROOT, name)
    os.makedirs(out, exist_ok=True)
    n_layers = params["num_hidden_layers"]
    block_prefix = f"model.layers.{n_layers}."
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as tmp_big:
        model.to(torch.bfloat16).save_pretrained(tmp)
        sd = load_file(os.path.join(tmp, "model.safetensors"))
        if mtp:
            sd = {("mtp.0." + k[len(block_prefix):] if k.startswith(block_prefix) else k): v for k, v in sd.items()}
            sd.update(mtp_extras(params, g))
            DeepseekV4Config(**params).save_pretrained(tmp)  # the main model alone
        quant, deq = {}, {}
        for k, v in sd.items():
            rule = next((fn for regex, fn in rules if regex.search(k)), None)
            if rule:
                q, scale, d = rule(v.float())
                quant[deepseek_name(k)] = q
                quant[deepseek_name(k)[: -len(".weight")] + ".scale"] = scale
                deq[k] = d
            else:
                quant[deepseek_name(k)], deq[k] = v, v.float() if v.is_floating_point() else v
        main = {k: v for k, v in deq.items() if not k.startswith("mtp.")}
        save_file(main, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        ref = DeepseekV4ForCausalLM.from_pretrained(tmp, dtype=torch.float32).eval()
        with open(os.path.join(tmp, "config.json")) as f:
            config = json.load(f)
        mtp_ref = None
        if mtp:
            # The MTP block's decoder part as layer n_layers of a one-layer-longer transformers model.
            big = dict(main, **{block_prefix + k[len("mtp.0."):]: v for k, v in deq.items()
                                if k.startswith("mtp.0.") and k[len("mtp.0."):] not in MTP_OWN})
            DeepseekV4Config(**with_mtp_layer(params)).save_pretrained(tmp_big)
            save_file(big, os.path.join(tmp_big, "model.safetensors"), metadata={"format": "pt"})
            big_ref = DeepseekV4ForCausalLM.from_pretrained(tmp_big, dtype=torch.float32).eval()
            extras = {k[len("mtp.0."):]: v.float() for k, v in deq.items()
                      if k.startswith("mtp.0.") and k[len("mtp.0."):] in MTP_OWN}
            mtp_ref = (big_ref.model.layers[n_layers], extras)
    config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "scale_fmt": "ue8m0", "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}
    config.update(extra_config)
    config.setdefault("architectures", ["DeepseekV4ForCausalLM"])
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    st_path = os.path.join(out, "model.safetensors")
    save_file(quant, st_path, metadata={"format": "pt"})
    write_expected(out, name, ref, mtp_ref)
    print(name, "weights", os.path.getsize(st_path), "bytes")


def build_fp8(name, params, seed):
    build_quantized(name, params, seed, [(FP8_LINEAR, quantize_fp8_ue8m0)], {})


def build_fp4(name, params, seed):
    # DeepSeek's V4-Flash config.json carries expert_dtype at the top level.
    build_quantized(name, params, seed, [(FP4_EXPERT, quantize_fp4_ue8m0), (FP8_WITH_FP4, quantize_fp8_ue8m0)],
                    {"expert_dtype": "fp4"}, mtp=True)


def main():
    # Optional arguments: the fixture names to (re)make; all of them by default.
    only = set(sys.argv[1:])
    for i, (name, (params, naming)) in enumerate(CASES.items()):
        if not only or name in only:
            build(name, params, naming, 4000 + i)
    if not only or "fp8_ue8m0" in only:
        build_fp8("fp8_ue8m0", FP8_CASE, 5000)
    if not only or "fp4_e2m1" in only:
        build_fp4("fp4_e2m1", FP4_CASE, 6000)


if __name__ == "__main__":
    main()
