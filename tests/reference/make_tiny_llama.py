# Makes two tiny random Hugging Face checkpoints (safetensors) and their reference logits, for
# tests/unit/model/hf_safetensors_test.cc. Run from the repo root: python3 tests/reference/make_tiny_llama.py
#   tiny_llama: LlamaForCausalLM, bf16 weights, untied lm_head, llama3 RoPE scaling.
#   tiny_qwen2: Qwen2ForCausalLM (q/k/v bias), f32 weights, tied embeddings.
# expected.json holds, for 3 fixed token sequences, the logits at every position computed by
# the HF model in float32 (bf16 weights widened exactly) with eager attention.
import json
import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
SEQUENCES = [
    [1, 17, 42, 255, 0],
    [200, 3, 3, 3, 99, 128, 7, 64, 31, 250, 11, 5],
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 100, 150, 200, 250, 255, 254, 120, 60, 30, 15],
]
COMMON = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0,
              max_position_embeddings=2048, rms_norm_eps=1e-5)


def randomize(model, seed):
    # HF's default init (std 0.02, norms = 1, biases = 0) would leave norms and biases untested:
    # draw everything, with a scale that keeps logits informative.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=g))


def build(name, cls, config, dtype, seed):
    torch.manual_seed(seed)
    model = cls(config).eval()
    randomize(model, seed)
    out = os.path.join(HERE, "fixtures", name)
    os.makedirs(out, exist_ok=True)
    model.to(dtype).save_pretrained(out, safe_serialization=True)
    if os.path.exists(os.path.join(out, "generation_config.json")):
        os.remove(os.path.join(out, "generation_config.json"))
    # Reference: reload what was saved and run it in float32.
    ref = cls.from_pretrained(out, torch_dtype=torch.float32, attn_implementation="eager").eval()
    cases = []
    with torch.no_grad():
        for ids in SEQUENCES:
            logits = ref(torch.tensor([ids])).logits[0]
            cases.append({"ids": ids,
                          "logits": [[round(float(v), 6) for v in row] for row in logits]})
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"model": name, "cases": cases}, f, separators=(",", ":"))


def main():
    llama = LlamaConfig(**COMMON, tie_word_embeddings=False, attention_bias=False,
                        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 64})
    build("tiny_llama", LlamaForCausalLM, llama, torch.bfloat16, 1234)
    qwen = Qwen2Config(**COMMON, tie_word_embeddings=True, use_sliding_window=False)
    build("tiny_qwen2", Qwen2ForCausalLM, qwen, torch.float32, 5678)


if __name__ == "__main__":
    main()
