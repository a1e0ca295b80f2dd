# Makes a tiny random LLaVA-layout checkpoint (LlavaForConditionalGeneration: SigLIP vision tower,
# GELU projector, Llama language model) and its reference outputs, for tests/unit/vision and the
# end-to-end tests. Run from the repo root: python3 tests/reference/make_tiny_llava.py
#   fixtures/tiny_llava/: config.json, model.safetensors (bf16), preprocessor_config.json (the
#     SigLIP PIL processor, 32x32), tokenizer.json (the tiny Llama-3-style BPE of
#     tokenizer_tiny_llama3 plus the special token "<image>"), tokenizer_config.json (a chat
#     template that places "<image>" for {"type": "image"} content parts).
#   fixtures/tiny_llava/expected.json: for prompts with 1 and 3 images (of different sizes and
#     formats, from fixtures/vision/images), the chat messages, the prompt ids after expanding each
#     "<image>" to the tower's 16 patch tokens (what LlavaProcessor does with
#     vision_feature_select_strategy "full"), the float32 logits of the last prompt position and
#     of every 7th position, the image embeddings (projector output) of the first image, and the
#     greedy tokens of LlavaForConditionalGeneration.generate (no EOS stop, 8 new tokens) and their
#     bytes.
import json
import os

import numpy as np
import torch
from PIL import Image
from tokenizers import AddedToken, Tokenizer
from transformers import LlamaConfig, LlavaConfig, LlavaForConditionalGeneration, SiglipVisionConfig
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")
OUT = os.path.join(FIX, "tiny_llava")
TEMPLATE = ("{{ bos_token }}{% for m in messages %}{{ m['role'] + ': ' }}{% if m['content'] is string %}"
            "{{ m['content'] }}{% else %}{% for p in m['content'] %}{% if p['type'] == 'image' %}<image>"
            "{% else %}{{ p['text'] }}{% endif %}{% endfor %}{% endif %}{{ eos_token }}{% endfor %}"
            "{% if add_generation_prompt %}assistant: {% endif %}")
CASES = [
    {"name": "one_image", "messages": [{"role": "user", "content": [
        {"type": "image", "file": "rgb.jpg"}, {"type": "text", "text": "What is in this picture?"}]}]},
    {"name": "three_images", "messages": [
        {"role": "system", "content": "You compare pictures."},
        {"role": "user", "content": [
            {"type": "text", "text": "First:"}, {"type": "image", "file": "rgba.png"},
            {"type": "text", "text": " second:"}, {"type": "image", "file": "lossy.webp"},
            {"type": "text", "text": " and third:"}, {"type": "image", "file": "big.png"},
            {"type": "text", "text": " which differs?"}]}]},
]


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=g))


def make_tokenizer():
    tok = Tokenizer.from_file(os.path.join(FIX, "tokenizer_tiny_llama3", "tokenizer.json"))
    tok.add_special_tokens([AddedToken("<image>", special=True, normalized=False)])
    tok.save(os.path.join(OUT, "tokenizer.json"))
    cfg = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "add_bos_token": False,
           "chat_template": TEMPLATE}
    with open(os.path.join(OUT, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return tok


def token_bytes(tok, token_id):
    # Byte-level BPE: each character of the token stands for one byte (GPT-2's table).
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    inverse = {chr(c): b for b, c in zip(bs, cs)}
    return bytes(inverse[ch] for ch in tok.id_to_token(token_id))


def render(messages):
    # The chat template above, by hand (jinja2 would do the same); content parts in order.
    text = "<|begin_of_text|>"
    for m in messages:
        text += m["role"] + ": "
        if isinstance(m["content"], str):
            text += m["content"]
        else:
            for p in m["content"]:
                text += "<image>" if p["type"] == "image" else p["text"]
        text += "<|eot_id|>"
    return text + "assistant: "


def main():
    os.makedirs(OUT, exist_ok=True)
    tok = make_tokenizer()
    image_id = tok.token_to_id("<image>")
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                                image_size=32, patch_size=8, layer_norm_eps=1e-6)
    text = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-5,
                       rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_id,
                         vision_feature_layer=-2, vision_feature_select_strategy="full",
                         projector_hidden_act="gelu", image_seq_length=16, tie_word_embeddings=False)
    torch.manual_seed(7)
    model = LlavaForConditionalGeneration(config).eval()
    randomize(model, 7)
    model.to(torch.bfloat16).save_pretrained(OUT, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(OUT, extra)):
            os.remove(os.path.join(OUT, extra))
    proc = SiglipImageProcessorPil(size={"height": 32, "width": 32})
    with open(os.path.join(OUT, "preprocessor_config.json"), "w") as f:
        json.dump(proc.to_dict(), f, indent=1)

    ref = LlavaForConditionalGeneration.from_pretrained(OUT, dtype=torch.float32, attn_implementation="eager").eval()
    n_tokens = 16
    cases = []
    for case in CASES:
        files = [p["file"] for m in case["messages"] if not isinstance(m["content"], str)
                 for p in m["content"] if p["type"] == "image"]
        ids = tok.encode(render(case["messages"]), add_special_tokens=False).ids
        assert ids.count(image_id) == len(files)
        expanded = []
        for t in ids:
            expanded += [t] * n_tokens if t == image_id else [t]
        images = [Image.open(os.path.join(FIX, "vision", "images", f)) for f in files]
        pixels = torch.tensor(np.stack([proc(images=im, return_tensors="np")["pixel_values"][0] for im in images]))
        input_ids = torch.tensor([expanded])
        with torch.no_grad():
            logits = ref(input_ids=input_ids, pixel_values=pixels).logits[0]
            feats = ref.get_image_features(pixel_values=pixels[:1], vision_feature_layer=-2,
                                           vision_feature_select_strategy="full")
            feats = feats.pooler_output if hasattr(feats, "pooler_output") else feats
            feats = feats[0] if isinstance(feats, (list, tuple)) else feats
            # An explicit all-ones mask: without one, generate masks every pad_token_id (0 = BOS here).
            gen = ref.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), pixel_values=pixels,
                               max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
        rows = sorted(set(range(0, len(expanded), 7)) | {len(expanded) - 1})
        cases.append({
            "name": case["name"], "messages": case["messages"], "images": files, "prompt_ids": expanded,
            "logits_rows": rows,
            "logits": [[round(float(v), 5) for v in logits[r]] for r in rows],
            "image0_embeddings": [[round(float(v), 6) for v in row] for row in feats.reshape(-1, 64)],
            "greedy": gen[0, len(expanded):].tolist(),
            "greedy_bytes": [list(token_bytes(tok, t)) for t in gen[0, len(expanded):].tolist()]})
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"image_token_id": image_id, "tokens_per_image": n_tokens, "cases": cases}, f,
                  separators=(",", ":"))
    print({c["name"]: (len(c["prompt_ids"]), c["greedy"]) for c in cases})


if __name__ == "__main__":
    main()
