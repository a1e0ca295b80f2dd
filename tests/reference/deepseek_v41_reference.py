# A runnable reference for DeepSeek-V4.1-Flash (model_type deepseek_v41) at test scale, in float32,
# built on transformers' DeepSeek-V4 classes (transformers >= 5.8 has no V4.1 class and PyPI has no
# V4.1 package). It follows DeepSeek's published description (shared/design/DEEPSEEK_V4.md,
# "V4.1-Flash differences") and facts read from public implementations (DeepSeek's Engram demo,
# and V4.1 ports that quote DeepSeek's inference/model.py). Reused from transformers where V4.1
# computes the same thing: RMSNorm, interleaved partial RoPE (+ YaRN), the grouped wo_a, the
# mHC parameters, routed and shared SwiGLU experts. Written here: KV-source compressors, index
# sources with reused top-k and the candidate-block mask, Engram, mHC collapse with the previous
# site's pre, the gate_temp router, the V4.1 attention (no per-head q norm), the head.
#
# One full forward over the whole sequence (no cache): the model is causal, so the logits at every
# position are what any prefill / chunked prefill / decode schedule must reproduce.
#
# CHOICES where the description is ambiguous or the detail is unknowable (also in docs/models.md):
#  1. Engram runs at the start of its layer, on the streams, before the attention mHC (as in
#     DeepSeek's Engram demo: h = engram(h) + ...); no short convolution (V4.1 ports carry none:
#     their Engram state is only the last max_ngram-1 token ids) and no rotation (identity basis).
#  2. Engram rows: one bf16 table per layer, `layers.N.engram.embed.weight` [sum(primes), head_dim]
#     (the real checkpoint keeps FP8 rows in host tables outside the safetensors; not modelled).
#     `engram.wkv` [(hc+1)*hidden, n_cols*head_dim] gives hc keys then one value; `q_weight`,
#     `k_weight` [hc, hidden] are the channel weights of the gate.
#  3. Engram hash layout: multipliers from numpy's default_rng(seed + 10007 * layer) as in
#     DeepSeek's demo; primes from the engram_vocab_size of each n-gram; the token map
#     (normalized ids) comes from the tokenizer, so the checkpoint ships it and the multipliers in
#     a sidecar `engram_hash.json` (the approach V4.1 GGUF ports take), written for a real
#     tokenizer by scripts/make_engram_hash.py (the tiny fixture's toy vocabulary gets a made-up map).
#  4. gate_temp divides the router logits before sqrt(softplus(.)).
#  5. The head: no hc_head; the streams collapse with the last FFN site's pre (the same rule as
#     every other collapse: the previous site's pre), then norm, then head.
#  6. Indexer keys: k_norm(wk(latent)) of the KV source's compressed latent (pre-RoPE), RoPE at
#     the entry position; index sources without a compressor read the latest KV source's keys.
#     Top-k picks only finite (visible, candidate) scores; fewer than index_topk -> fewer picks.
#  7. Candidate mask (candidate_source_layer_id): per query, block score = max score of its
#     candidate_block_size entries; the block of the newest visible entry is always kept; the
#     best candidate_topk_blocks blocks (pinned one included) with a finite score are kept. Later
#     index sources score only inside them. The candidate source itself picks its top-k without it.
#  8. Compressed entry w stands at position w * ratio (RoPE) and is visible to query t when
#     w < (t + 1) // ratio. Ratio 1: latent = norm(wkv x) (no wgate); ratio 2: per-feature
#     softmax of wgate x over the pair, no ape, no overlap.
import math
import pathlib
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import DeepseekV4Config
from transformers.models.deepseek_v4.modeling_deepseek_v4 import (
    DeepseekV4Experts, DeepseekV4GroupedLinear, DeepseekV4HyperConnection, DeepseekV4MLP,
    DeepseekV4RMSNorm, DeepseekV4RotaryEmbedding, apply_rotary_pos_emb)

# The multipliers come from the tool that writes a real checkpoint's engram_hash.json (one
# derivation for the reference, the fixtures and real checkpoints).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
from make_engram_hash import engram_multipliers, engram_primes  # noqa: E402,F401


def v4_config(tc):
    """transformers' V4 config for the pieces reused from V4 (sizes, RoPE tables)."""
    rope_dim = tc["qk_rope_head_dim"]
    return DeepseekV4Config(
        vocab_size=tc["vocab_size"], hidden_size=tc["hidden_size"], num_attention_heads=tc["num_attention_heads"],
        num_key_value_heads=1, head_dim=tc["head_dim"], q_lora_rank=tc["q_lora_rank"], o_groups=tc["o_groups"],
        o_lora_rank=tc["o_lora_rank"], moe_intermediate_size=tc["moe_intermediate_size"],
        n_routed_experts=tc["n_routed_experts"], num_experts_per_tok=tc["num_experts_per_tok"],
        n_shared_experts=1, hc_mult=tc["hc_mult"], hc_sinkhorn_iters=tc["hc_sinkhorn_iters"], hc_eps=tc["hc_eps"],
        rms_norm_eps=tc["rms_norm_eps"], swiglu_limit=tc["swiglu_limit"], num_hidden_layers=1,
        partial_rotary_factor=rope_dim / tc["head_dim"], max_position_embeddings=tc["max_position_embeddings"],
        sliding_window=tc["sliding_window"], layer_types=["sliding_attention"], mlp_layer_types=["moe"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
        rope_theta=tc["rope_theta"], compress_rope_theta=tc["compress_rope_theta"],
        rope_parameters=tc.get("rope_scaling"), index_head_dim=tc["index_head_dim"],
        index_n_heads=tc["index_n_heads"], index_topk=tc["index_topk"], routed_scaling_factor=tc["routed_scaling_factor"],
        tie_word_embeddings=False)


# ---------------------------------------------------------------------------------------------
# Engram hashing (pure numpy; the C++ hash test compares against what this writes)

def engram_rows(tc, hash_layout, ids, layer):
    """Row of the layer's table for every (position, column): columns n-gram major, head minor."""
    token_map = np.asarray(hash_layout["token_map"], dtype=np.int64)
    pad = int(hash_layout["pad_id"])
    mult = np.asarray([int(m) for m in hash_layout["multipliers"][str(layer)]], dtype=np.int64)
    primes = engram_primes(tc)[layer]
    x = token_map[np.asarray(ids, dtype=np.int64)]
    T, N = len(ids), tc["engram_max_ngram_size"]
    shifted = [np.concatenate([np.full(k, pad, dtype=np.int64), x[:T - k]]) for k in range(N)]
    cols, offset = [], 0
    mix = shifted[0] * mult[0]
    for n in range(2, N + 1):
        mix = np.bitwise_xor(mix, shifted[n - 1] * mult[n - 1])
        for p in primes[n - 2]:
            cols.append(mix % p + offset)
            offset += p
    return np.stack(cols, axis=1)  # [T, n_cols]


# ---------------------------------------------------------------------------------------------
# Modules. Parameter names follow DeepSeek's checkpoint names where this file owns the module.

def rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class V41HyperConnection(DeepseekV4HyperConnection):
    """transformers' mHC parameters (fn, base, scale) and math, returning pre instead of collapsing:
    V4.1 collapses a site's input with the PREVIOUS site's pre."""

    def mixes(self, h):
        hc = self.hc_mult
        flat = self.input_norm(h.reshape(*h.shape[:-2], -1).float())
        m = F.linear(flat, self.fn.float())
        pre_w, post_w, comb_w = m.split([hc, hc, hc * hc], dim=-1)
        pre_b, post_b, comb_b = self.base.split([hc, hc, hc * hc])
        s_pre, s_post, s_comb = self.scale.unbind(0)
        pre = torch.sigmoid(pre_w * s_pre + pre_b) + self.hc_eps
        post = 2 * torch.sigmoid(post_w * s_post + post_b)
        comb = torch.softmax(comb_w.view(*comb_w.shape[:-1], hc, hc) * s_comb + comb_b.view(hc, hc), dim=-1) + self.hc_eps
        comb = comb / (comb.sum(dim=-2, keepdim=True) + self.hc_eps)
        for _ in range(self.hc_sinkhorn_iters - 1):
            comb = comb / (comb.sum(dim=-1, keepdim=True) + self.hc_eps)
            comb = comb / (comb.sum(dim=-2, keepdim=True) + self.hc_eps)
        return pre, post, comb


def collapse(h, pre):
    return (pre.unsqueeze(-1) * h).sum(dim=-2)


def expand(out, h, post, comb):
    # Y_j = post_j * out + sum_i comb[i][j] * X_i
    return post.unsqueeze(-1) * out.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), h)


class Compressor(nn.Module):
    def __init__(self, tc, ratio):
        super().__init__()
        H, hd = tc["hidden_size"], tc["head_dim"]
        self.ratio, self.eps = ratio, tc["rms_norm_eps"]
        self.wkv = nn.Linear(H, hd, bias=False)
        self.wgate = nn.Linear(H, hd, bias=False) if ratio > 1 else None
        self.norm = DeepseekV4RMSNorm(hd, eps=self.eps)

    def forward(self, x):
        """x [T, H] -> latents [T // ratio, hd], normalized, before RoPE."""
        kv = self.wkv(x)
        n = x.shape[0] // self.ratio
        if self.ratio == 1:
            return self.norm(kv)
        kv = kv[: n * self.ratio].view(n, self.ratio, -1)
        score = self.wgate(x)[: n * self.ratio].view(n, self.ratio, -1)
        return self.norm((kv * score.softmax(dim=1)).sum(dim=1))


class Indexer(nn.Module):
    def __init__(self, tc, owns_keys):
        super().__init__()
        H, ihd, inh = tc["hidden_size"], tc["index_head_dim"], tc["index_n_heads"]
        self.ihd, self.inh = ihd, inh
        self.wq_b = nn.Linear(tc["q_lora_rank"], inh * ihd, bias=False)
        self.weights_proj = nn.Linear(H, inh, bias=False)
        if owns_keys:
            self.wk = nn.Linear(tc["head_dim"], ihd, bias=False)
            self.k_norm = DeepseekV4RMSNorm(ihd, eps=tc["rms_norm_eps"])

    def keys(self, latent, cos, sin):
        k = self.k_norm(self.wk(latent))
        return apply_rotary_pos_emb(k.unsqueeze(0), cos, sin, unsqueeze_dim=0)[0]

    def scores(self, x, qr, keys, cos, sin):
        """[T, n_entries] = sum_h w_h relu(q_h . k), w = weights_proj(x) / sqrt(ihd * inh)."""
        q = self.wq_b(qr).view(x.shape[0], self.inh, self.ihd)
        q = apply_rotary_pos_emb(q, cos, sin, unsqueeze_dim=1)
        w = self.weights_proj(x) * (self.ihd ** -0.5) * (self.inh ** -0.5)
        return (F.relu(torch.einsum("thd,sd->ths", q, keys)) * w.unsqueeze(-1)).sum(dim=1)


def topk_finite(scores, k):
    """Boolean [T, S]: each row's top-k among its finite scores."""
    keep = torch.zeros_like(scores, dtype=torch.bool)
    for t in range(scores.shape[0]):
        finite = torch.isfinite(scores[t]).nonzero().flatten()
        if len(finite) == 0:
            continue
        n = min(k, len(finite))
        keep[t, scores[t].topk(n).indices] = True
    return keep


def candidate_mask(scores, visible, topk_blocks, block):
    """Boolean [T, S]: per query the best `topk_blocks` blocks of `block` entries (block score = max),
    the block of the newest visible entry pinned."""
    T, S = scores.shape
    nb = -(-S // block)
    keep = torch.zeros_like(scores, dtype=torch.bool)
    for t in range(T):
        padded = torch.full((nb * block,), float("-inf"))
        padded[:S] = scores[t]
        bscore = padded.view(nb, block).amax(dim=1)
        if visible[t] > 0:
            bscore[(visible[t] - 1) // block] = float("inf")
        finite = (bscore > float("-inf")).nonzero().flatten()
        if len(finite) == 0:
            continue
        best = bscore.topk(min(topk_blocks, len(finite))).indices
        bkeep = torch.zeros(nb, dtype=torch.bool)
        bkeep[best] = True
        keep[t] = bkeep.repeat_interleave(block)[:S]
    return keep


class Attention(nn.Module):
    def __init__(self, tc, layer, roles):
        super().__init__()
        H, nh, hd = tc["hidden_size"], tc["num_attention_heads"], tc["head_dim"]
        self.nh, self.hd, self.window, self.eps = nh, hd, tc["sliding_window"], tc["rms_norm_eps"]
        self.layer, self.ratio = layer, tc["compress_ratios"][layer]
        self.rope_type = "compress" if self.ratio > 0 else "main"
        self.wq_a = nn.Linear(H, tc["q_lora_rank"], bias=False)
        self.q_norm = DeepseekV4RMSNorm(tc["q_lora_rank"], eps=self.eps)
        self.wq_b = nn.Linear(tc["q_lora_rank"], nh * hd, bias=False)
        self.wkv = nn.Linear(H, hd, bias=False)
        self.kv_norm = DeepseekV4RMSNorm(hd, eps=self.eps)
        self.wo_a = DeepseekV4GroupedLinear(nh * hd // tc["o_groups"], tc["o_groups"] * tc["o_lora_rank"], tc["o_groups"])
        self.wo_b = nn.Linear(tc["o_groups"] * tc["o_lora_rank"], H, bias=False)
        self.attn_sink = nn.Parameter(torch.zeros(nh))
        self.is_kv_source = layer in roles["kv_sources"]
        self.is_index_source = layer in roles["index_sources"]
        self.is_candidate_source = layer == roles["candidate_source"]
        self.uses_candidates = self.is_index_source and 0 <= roles["candidate_source"] < layer
        self.compressor = Compressor(tc, self.ratio) if self.is_kv_source else None
        self.indexer = Indexer(tc, owns_keys=self.is_kv_source) if self.is_index_source else None
        self.tc = tc

    def forward(self, x, pos, rope, shared, trace):
        T = x.shape[0]
        cos, sin = rope(x, pos[None], layer_type=self.rope_type)
        cos, sin = cos[0], sin[0]
        qr = self.q_norm(self.wq_a(x))
        q = apply_rotary_pos_emb(self.wq_b(qr).view(T, self.nh, self.hd), cos, sin, unsqueeze_dim=1)
        kv = apply_rotary_pos_emb(self.kv_norm(self.wkv(x)).unsqueeze(0), cos, sin, unsqueeze_dim=0)[0]
        trace(f"attn_q", q)
        trace(f"attn_kv", kv)
        keys = kv
        bias = torch.where((pos[None, :] <= pos[:, None]) & (pos[None, :] > pos[:, None] - self.window), 0.0,
                           float("-inf"))
        if self.ratio > 0:
            r = self.ratio
            if self.is_kv_source:
                latent = self.compressor(x)
                epos = torch.arange(latent.shape[0]) * r
                ccos, csin = rope(x, epos[None], layer_type="compress")
                ccos, csin = ccos[0], csin[0]
                shared["compressed"] = apply_rotary_pos_emb(latent.unsqueeze(0), ccos, csin, unsqueeze_dim=0)[0]
                shared["ratio"] = r
                trace("compressed", shared["compressed"])
                if self.is_index_source:
                    shared["index_keys"] = self.indexer.keys(latent, ccos, csin)
                    trace("index_keys", shared["index_keys"])
            assert shared["ratio"] == r, f"layer {self.layer}: ratio {r} reads a ratio-{shared['ratio']} source"
            comp = shared["compressed"]
            n = comp.shape[0]
            visible = (pos + 1) // r
            causal = torch.arange(n)[None, :] < visible[:, None]
            if self.is_index_source:
                scores = self.indexer.scores(x, qr, shared["index_keys"], cos, sin)
                scores = scores.masked_fill(~causal, float("-inf"))
                trace("index_scores", scores)
                if self.is_candidate_source:
                    shared["candidates"] = candidate_mask(scores, visible, self.tc["candidate_topk_blocks"],
                                                          self.tc["candidate_block_size"])
                    trace("candidates", shared["candidates"])
                elif self.uses_candidates:
                    scores = scores.masked_fill(~shared["candidates"], float("-inf"))
                shared["topk"] = topk_finite(scores, self.tc["index_topk"])
                trace("topk", shared["topk"])
                shared["scores"] = scores
            picked = shared["topk"] & causal
            keys = torch.cat([kv, comp], dim=0)
            bias = torch.cat([bias, torch.where(picked, 0.0, float("-inf"))], dim=1)
        logits = torch.einsum("thd,sd->ths", q, keys) * self.hd ** -0.5 + bias[:, None, :]
        sink = self.attn_sink.view(1, -1, 1).expand(T, -1, 1)
        probs = torch.softmax(torch.cat([logits, sink], dim=-1), dim=-1)[..., :-1]
        out = torch.einsum("ths,sd->thd", probs, keys)
        out = apply_rotary_pos_emb(out, cos, -sin, unsqueeze_dim=1)  # undo the rotation at the query
        trace("attn_out", out)
        return self.wo_b(self.wo_a(out.reshape(T, self.tc["o_groups"], -1)).flatten(-2))


class Router(nn.Module):
    def __init__(self, tc):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(tc["n_routed_experts"], tc["hidden_size"]))
        self.bias = nn.Parameter(torch.zeros(tc["n_routed_experts"]))
        self.top_k, self.temp, self.scale = tc["num_experts_per_tok"], tc["gate_temp"], tc["routed_scaling_factor"]

    def forward(self, x):
        scores = torch.sqrt(F.softplus(F.linear(x, self.weight) / self.temp))
        idx = torch.topk(scores + self.bias, self.top_k, dim=-1).indices
        w = scores.gather(1, idx)
        return idx, w / w.sum(dim=-1, keepdim=True) * self.scale, scores


class MoE(nn.Module):
    def __init__(self, tc, cfg):
        super().__init__()
        self.gate = Router(tc)
        self.experts = DeepseekV4Experts(cfg)
        self.shared_experts = DeepseekV4MLP(cfg)

    def forward(self, x, trace):
        idx, w, scores = self.gate(x)
        trace("router_scores", scores)
        order = idx.argsort(dim=-1)  # experts ascending, for comparisons
        trace("router_idx", idx.gather(1, order))
        trace("router_weights", w.gather(1, order))
        return self.experts(x, idx, w) + self.shared_experts(x)


class Engram(nn.Module):
    def __init__(self, tc, n_rows):
        super().__init__()
        H, hc = tc["hidden_size"], tc["hc_mult"]
        n_cols = (tc["engram_max_ngram_size"] - 1) * tc["engram_n_heads"]
        self.hc, self.eps = hc, tc["rms_norm_eps"]
        self.embed = nn.Embedding(n_rows, tc["engram_head_dim"])
        self.wkv = nn.Linear(n_cols * tc["engram_head_dim"], (hc + 1) * H, bias=False)
        self.q_weight = nn.Parameter(torch.ones(hc, H))
        self.k_weight = nn.Parameter(torch.ones(hc, H))

    def forward(self, h, rows, trace):
        T, hc, H = h.shape
        e = self.embed(rows).flatten(1)
        kv = self.wkv(e)
        key, value = kv[:, : hc * H].view(T, hc, H), kv[:, hc * H:]
        dot = (h * self.q_weight * self.k_weight * key).sum(-1)
        dot = dot * torch.rsqrt(h.pow(2).mean(-1) + self.eps) * torch.rsqrt(key.pow(2).mean(-1) + self.eps) / math.sqrt(H)
        gate = torch.sigmoid(torch.sign(dot) * dot.abs().clamp_min(1e-6).sqrt())
        trace("engram_gate", gate)
        return h + gate.unsqueeze(-1) * value.unsqueeze(1)


class Block(nn.Module):
    def __init__(self, tc, cfg, layer, roles, engram_rows):
        super().__init__()
        H = tc["hidden_size"]
        self.attn_norm = DeepseekV4RMSNorm(H, eps=tc["rms_norm_eps"])
        self.ffn_norm = DeepseekV4RMSNorm(H, eps=tc["rms_norm_eps"])
        self.hc_attn = V41HyperConnection(cfg)
        self.hc_ffn = V41HyperConnection(cfg)
        self.attn = Attention(tc, layer, roles)
        self.ffn = MoE(tc, cfg)
        self.engram = Engram(tc, engram_rows) if engram_rows else None

    def forward(self, h, pre, pos, rope, shared, rows, trace):
        if self.engram is not None:
            h = self.engram(h, rows, trace)
            trace("after_engram", h)
        trace("hc_in", h)
        attn_pre, post, comb = self.hc_attn.mixes(h)
        a_in = self.attn_norm(collapse(h, pre))
        trace("attn_in", a_in)
        a_out = self.attn(a_in, pos, rope, shared, trace)
        trace("attn_result", a_out)
        h = expand(a_out, h, post, comb)
        trace("after_attn", h)
        ffn_pre, post, comb = self.hc_ffn.mixes(h)
        f_in = self.ffn_norm(collapse(h, attn_pre))
        trace("ffn_in", f_in)
        f_out = self.ffn(f_in, trace)
        trace("ffn_result", f_out)
        h = expand(f_out, h, post, comb)
        trace("layer_out", h)
        return h, ffn_pre


class DeepseekV41Reference(nn.Module):
    def __init__(self, tc, hash_layout):
        super().__init__()
        self.tc, self.hash_layout = tc, hash_layout
        cfg = v4_config(tc)
        self.rope = DeepseekV4RotaryEmbedding(cfg)
        roles = {"kv_sources": tc["kv_source_layer_ids"], "index_sources": tc["index_source_layer_ids"],
                 "candidate_source": tc["candidate_source_layer_id"]}
        primes = engram_primes(tc)
        self.embed = nn.Embedding(tc["vocab_size"], tc["hidden_size"])
        self.layers = nn.ModuleList(
            Block(tc, cfg, i, roles, sum(map(sum, primes[i])) if i in primes else 0)
            for i in range(tc["num_hidden_layers"]))
        self.norm = DeepseekV4RMSNorm(tc["hidden_size"], eps=tc["rms_norm_eps"])
        self.head = nn.Linear(tc["hidden_size"], tc["vocab_size"], bias=False)

    def forward(self, ids, trace=None):
        """ids: list of token ids (one sequence from position 0) -> logits [T, vocab]."""
        traced = trace or (lambda *_: None)
        T, hc = len(ids), self.tc["hc_mult"]
        pos = torch.arange(T)
        h = self.embed(torch.tensor(ids)).unsqueeze(1).expand(T, hc, -1).clone()
        pre = torch.zeros(T, hc)
        pre[:, 0] = 1.0  # first layer: one-hot on stream 0
        shared = {}
        for i, layer in enumerate(self.layers):
            rows = None
            if layer.engram is not None:
                rows = torch.from_numpy(engram_rows(self.tc, self.hash_layout, ids, i))
            h, pre = layer(h, pre, pos, self.rope, shared,
                           rows, lambda name, v, i=i: traced(f"layers.{i}.{name}", v))
        return self.head(self.norm(collapse(h, pre)))
