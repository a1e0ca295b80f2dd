"""Writes a random DeepSeek-V3 checkpoint with DeepSeek-V3's routing shape (256 routed experts in
8 groups, top-4 groups, top-8 experts, 1 shared expert) but tiny layers (hidden 64, expert width
16, 4 layers of which 3 MoE; byte-level tokenizer), for expert-parallel load experiments: the
expert traces behind the imbalance table in docs/benchmarks.md. Needs numpy only (no torch).
  python3 tests/reference/make_wide_deepseek_v3.py OUT_DIR"""
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from byte_tokenizer import write_byte_tokenizer  # noqa: E402
from safetensors_util import write_safetensors  # noqa: E402

CONFIG = dict(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", vocab_size=256, hidden_size=64,
              intermediate_size=96, moe_intermediate_size=16, num_hidden_layers=4, first_k_dense_replace=1,
              num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=32, qk_rope_head_dim=8,
              qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8,
              n_group=8, topk_group=4, norm_topk_prob=True, routed_scaling_factor=2.5, scoring_func="sigmoid",
              topk_method="noaux_tc", moe_layer_freq=1, rms_norm_eps=1e-6, rope_theta=10000.0,
              max_position_embeddings=2048, tie_word_embeddings=False, attention_bias=False, bos_token_id=0,
              eos_token_id=1, num_nextn_predict_layers=0, hidden_act="silu")


def bf16(shape, rng, scale=0.05):
    f = (rng.standard_normal(shape).astype(np.float32) * scale).view(np.uint32)
    return ({"dtype": "BF16", "shape": list(shape)}, (f >> 16).astype(np.uint16).tobytes())


def ones(n):
    return ({"dtype": "F32", "shape": [n]}, np.ones(n, np.float32).tobytes())


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    c, rng = CONFIG, np.random.default_rng(11)
    H, V, heads = c["hidden_size"], c["vocab_size"], c["num_attention_heads"]
    qk, R, rope = c["qk_nope_head_dim"] + c["qk_rope_head_dim"], c["kv_lora_rank"], c["qk_rope_head_dim"]
    t = {"model.embed_tokens.weight": bf16((V, H), rng, 1.0), "lm_head.weight": bf16((V, H), rng),
         "model.norm.weight": ones(H)}

    def mlp(p, inter):
        t.update({f"{p}.gate_proj.weight": bf16((inter, H), rng), f"{p}.up_proj.weight": bf16((inter, H), rng),
                  f"{p}.down_proj.weight": bf16((H, inter), rng)})

    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}"
        t.update({f"{p}.input_layernorm.weight": ones(H), f"{p}.post_attention_layernorm.weight": ones(H),
                  f"{p}.self_attn.q_a_proj.weight": bf16((c["q_lora_rank"], H), rng),
                  f"{p}.self_attn.q_a_layernorm.weight": ones(c["q_lora_rank"]),
                  f"{p}.self_attn.q_b_proj.weight": bf16((heads * qk, c["q_lora_rank"]), rng),
                  f"{p}.self_attn.kv_a_proj_with_mqa.weight": bf16((R + rope, H), rng),
                  f"{p}.self_attn.kv_a_layernorm.weight": ones(R),
                  f"{p}.self_attn.kv_b_proj.weight": bf16((heads * (c["qk_nope_head_dim"] + c["v_head_dim"]), R), rng),
                  f"{p}.self_attn.o_proj.weight": bf16((H, heads * c["v_head_dim"]), rng)})
        if l < c["first_k_dense_replace"]:
            mlp(f"{p}.mlp", c["intermediate_size"])
            continue
        E = c["n_routed_experts"]
        t[f"{p}.mlp.gate.weight"] = ({"dtype": "F32", "shape": [E, H]},
                                     (rng.standard_normal((E, H)).astype(np.float32) * 0.05).tobytes())
        t[f"{p}.mlp.gate.e_score_correction_bias"] = ({"dtype": "F32", "shape": [E]}, np.zeros(E, np.float32).tobytes())
        for e in range(E):
            mlp(f"{p}.mlp.experts.{e}", c["moe_intermediate_size"])
        mlp(f"{p}.mlp.shared_experts", c["moe_intermediate_size"] * c["n_shared_experts"])
    write_safetensors(out / "model.safetensors", t)
    (out / "config.json").write_text(json.dumps(CONFIG, indent=1))
    write_byte_tokenizer(out, size=256)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
