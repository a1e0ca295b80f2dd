# A random LLaVA-layout checkpoint with real shapes, for `deepinfer bench --mode vision`: a
# SigLIP-B/16 tower at 224x224 (12 layers x 768, 196 tokens per image), the GELU projector and a
# SmolLM2-135M-shaped Llama (30 layers x 576), with the tiny test tokenizer and chat template of
# tests/reference/make_tiny_llava.py. Random weights: the timings are real, the text is noise.
# Usage: python3 scripts/make_bench_llava.py [OUT_DIR]   (default /tmp/bench_llava, ~0.4 GB)
import json
import os
import sys

import torch
from transformers import LlamaConfig, LlavaConfig, LlavaForConditionalGeneration, SiglipVisionConfig
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import make_tiny_llava as tiny  # noqa: E402


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/bench_llava"
    os.makedirs(out, exist_ok=True)
    tiny.OUT = out
    tok = tiny.make_tokenizer()
    vision = SiglipVisionConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                                image_size=224, patch_size=16, layer_norm_eps=1e-6)
    text = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                       num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rms_norm_eps=1e-5,
                       rope_theta=100000.0, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=tok.token_to_id("<image>"),
                         vision_feature_layer=-2, vision_feature_select_strategy="full",
                         projector_hidden_act="gelu", image_seq_length=196, tie_word_embeddings=False)
    torch.manual_seed(7)
    model = LlavaForConditionalGeneration(config).eval()
    tiny.randomize(model, 7)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    if os.path.exists(os.path.join(out, "generation_config.json")):
        os.remove(os.path.join(out, "generation_config.json"))
    proc = SiglipImageProcessorPil(size={"height": 224, "width": 224})
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(proc.to_dict(), f, indent=1)
    print(out)


if __name__ == "__main__":
    main()
