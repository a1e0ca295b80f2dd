// The V4.1 attention block over paged state rows (deepseek_v41_state.h); scalar per query apart
// from the projections, as V4's, whose compressor, sink attention, RoPE and grouped projection it
// runs.
#include "deepinfer/model/deepseek_v41_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>

#include "deepinfer/base/check.h"
#include "deepinfer/kernels/cpu/indexer_score.h"
#include "deepinfer/model/deepseek_v41_compressor.h"
#include "deepinfer/model/deepseek_v41_selection.h"
#include "deepinfer/model/layers/rms_norm.h"

namespace deepinfer::model {
namespace {

// The layer's RoPE on the trailing rope_dim channels: the compressed layers' (YaRN) at a
// compressed layer, the main one at a window-only layer.
void rope_layer(const DeepseekV41Config& c, bool compressed, float* x, int64_t T, int heads,
                int head_dim, const int32_t* pos) {
  v4_rope_tail(c.rope_dim, compressed ? c.compress_theta : c.main_theta,
               compressed ? c.compress_scaling : c.main_scaling, x, T, heads, head_dim,
               int64_t{heads} * head_dim, pos);
}

// q (no per-head norm in V4.1), kv and (index sources) the indexer's query and weights of every
// token; the new K=V rows written into the layer's window rows.
void project(const DeepseekV41Config& c, int layer, const V41Attention& w, const ForwardBatch& b,
             const float* h, const V4LayerCache& own, V41AttnScratch& s, ForwardContext& ctx) {
  const int64_t T = b.num_tokens(), H = c.hidden, D = c.head_dim, nh = c.n_heads;
  const V41Layer& L = c.layers[layer];
  const bool compressed = L.ratio > 0;
  s.qr.resize(T * c.q_lora_rank);
  s.q.resize(T * nh * D);
  s.kv.resize(T * D);
  linear_forward(w.wq_a, h, T, H, s.qr.data(), c.q_lora_rank, ctx);
  rms_norm_rows(s.qr.data(), c.q_lora_rank, w.q_norm, s.qr.data(), c.q_lora_rank, T, c.q_lora_rank,
                c.rms_eps);
  linear_forward(w.wq_b, s.qr.data(), T, c.q_lora_rank, s.q.data(), nh * D, ctx);
  rope_layer(c, compressed, s.q.data(), T, static_cast<int>(nh), static_cast<int>(D),
             b.positions.data());
  linear_forward(w.wkv, h, T, H, s.kv.data(), D, ctx);
  rms_norm_rows(s.kv.data(), D, w.kv_norm, s.kv.data(), D, T, D, c.rms_eps);
  rope_layer(c, compressed, s.kv.data(), T, 1, static_cast<int>(D), b.positions.data());
  for (int sq = 0; sq < b.num_seqs(); ++sq) {
    const V4SeqState st = v4_seq_state(b, sq, own);
    for (int64_t t = b.seq_token_start[sq]; t < b.seq_token_start[sq + 1]; ++t)
      std::memcpy(st.row(b.positions[t]) + own.layout.kv, s.kv.data() + t * D, sizeof(float) * D);
  }
  if (!L.runs_indexer) return;
  const int64_t nih = c.index_n_heads, Di = c.index_head_dim;
  s.iq.resize(T * nih * Di);
  s.iw.resize(T * nih);
  linear_forward(w.indexer.wq_b, s.qr.data(), T, c.q_lora_rank, s.iq.data(), nih * Di, ctx);
  rope_layer(c, true, s.iq.data(), T, static_cast<int>(nih), static_cast<int>(Di),
             b.positions.data());
  linear_forward(w.indexer.weights_proj, h, T, H, s.iw.data(), nih, ctx);
  const float wscale = 1.0f / std::sqrt(float(nih));
  for (float& v : s.iw) v *= wscale;
}

// A KV source's compressor: every new token's projections into its recent row, each entry whose
// window closes among them into the block; at an index source also the entry's index key,
// k_norm(wk(latent)) of the pre-RoPE latent, rotated at the entry's position.
void compress(const DeepseekV41Config& c, int layer, const V41Attention& w, const ForwardBatch& b,
              const float* h, const V4LayerCache& own, V41AttnScratch& s, ForwardContext& ctx) {
  const V41Layer& L = c.layers[layer];
  const int64_t T = b.num_tokens(), D = c.head_dim, Di = c.index_head_dim;
  V4CompressorDims d = v41_compressor_dims(c, L.ratio);
  d.kv_off = own.layout.comp_kv;
  d.score_off = own.layout.comp_score;
  d.entry_off = own.layout.comp_entries;
  s.ckv.resize(T * D);
  linear_forward(w.compressor.wkv, h, T, c.hidden, s.ckv.data(), D, ctx);
  const bool scored = L.ratio > 1;
  if (scored) {
    s.cscore.resize(T * D);
    linear_forward(w.compressor.wgate, h, T, c.hidden, s.cscore.data(), D, ctx);
  }
  for (int sq = 0; sq < b.num_seqs(); ++sq) {
    const int64_t t0 = b.seq_token_start[sq], n = b.seq_token_start[sq + 1] - t0;
    v4_compressor_step(d, w.compressor, v4_seq_state(b, sq, own), s.ckv.data() + t0 * D,
                       scored ? s.cscore.data() + t0 * D : nullptr, b.positions.data() + t0, n);
  }
  if (!L.runs_indexer) return;
  // The entries closed in this step (as v4_compressor_step writes them): pool each again for its
  // pre-RoPE latent, then all their keys at once.
  s.closed.clear();
  s.closed_seq.clear();
  for (int sq = 0; sq < b.num_seqs(); ++sq) {
    const V4SeqState st = v4_seq_state(b, sq, own);
    for (int64_t t = b.seq_token_start[sq]; t < b.seq_token_start[sq + 1]; ++t) {
      const int32_t p = b.positions[t];
      if ((p + 1) % L.ratio != 0 || p < st.entries_from) continue;
      s.closed.push_back(p / L.ratio);
      s.closed_seq.push_back(sq);
    }
  }
  const int64_t n = static_cast<int64_t>(s.closed.size());
  s.latents.resize(n * D);
  s.keys.resize(n * Di);
  for (int64_t i = 0; i < n; ++i)
    v4_pool_entry(d, w.compressor, v4_seq_state(b, s.closed_seq[i], own), s.closed[i],
                  s.latents.data() + i * D);
  v41_index_keys(c, w.indexer, L.ratio, s.latents.data(), s.closed.data(), n, s.keys.data(), ctx);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(v4_seq_state(b, s.closed_seq[i], own)
                    .entry(own.layout.idx_entries, Di, L.ratio, s.closed[i]),
                s.keys.data() + i * Di, sizeof(float) * Di);
}

// An index source's choice for batch token t at position p, over its KV source's entries: the
// indexer scores of the visible entries, the candidate mask published (candidate source) or
// obeyed (later index sources), the top-k into picks.
void index_query(const DeepseekV41Config& c, int layer, const V4LayerCache& source,
                 const V4SeqState& st, int64_t t, int64_t p, const V41AttnScratch& a,
                 V41Picks& picks, V4QueryScratch& s) {
  const V41Layer& L = c.layers[layer];
  const int64_t Di = c.index_head_dim, n_visible = (p + 1) / L.ratio;
  s.entry_keys.resize(n_visible);
  for (int64_t e = 0; e < n_visible; ++e)
    s.entry_keys[e] = st.entry(source.layout.idx_entries, Di, L.ratio, e);
  s.isc.resize(n_visible);
  const kernels::IndexerScoreParams ip{a.iq.data() + t * c.index_n_heads * Di,
                                       a.iw.data() + t * c.index_n_heads, c.index_n_heads,
                                       static_cast<int>(Di), 1.0f / std::sqrt(float(Di))};
  kernels::indexer_scores(ip, s.entry_keys.data(), n_visible, s.isc.data());
  const std::span<const float> scores(s.isc.data(), n_visible);
  std::span<const uint8_t> mask;
  if (L.publishes_candidates) {
    const std::span<uint8_t> keep(picks.candidates.data() + picks.cand_indptr[t], n_visible);
    v41_candidate_blocks(scores, n_visible, c.candidate_topk_blocks, c.candidate_block_size, keep);
  } else if (L.uses_candidates) {
    const int64_t have = picks.cand_indptr[t + 1] - picks.cand_indptr[t];
    DI_CHECK(have >= n_visible, "V4.1 layer {}: candidate mask of {} entries for {} visible", layer,
             have, n_visible);
    mask = std::span<const uint8_t>(picks.candidates.data() + picks.cand_indptr[t], n_visible);
  }
  picks.n_topk[t] =
      v41_select_topk(scores, n_visible, mask, c.index_topk,
                      std::span<int32_t>(picks.topk.data() + t * c.index_topk, c.index_topk));
}

// Keys of batch token t (position p): the layer's window rows, then the picked entries of its
// KV source.
void gather_keys(const DeepseekV41Config& c, int layer, const V4LayerCache& own,
                 const V4LayerCache& source, const ForwardBatch& b, int sq, int64_t t,
                 const V41AttnScratch& a, V41Picks& picks, V4QueryScratch& s) {
  const V41Layer& L = c.layers[layer];
  const int64_t p = b.positions[t];
  const V4SeqState st = v4_seq_state(b, sq, own);
  s.keys.clear();
  for (int64_t q = std::max<int64_t>(st.window_floor, p - c.sliding_window + 1); q <= p; ++q)
    s.keys.push_back(st.row(q) + own.layout.kv);
  if (L.ratio == 0) return;
  const V4SeqState src = v4_seq_state(b, sq, source);
  if (L.runs_indexer) index_query(c, layer, source, src, t, p, a, picks, s);
  const int32_t* picked = picks.topk.data() + t * c.index_topk;
  for (int i = 0; i < picks.n_topk[t]; ++i)
    s.keys.push_back(src.entry(source.layout.comp_entries, c.head_dim, L.ratio, picked[i]));
}

// Sizes the picks this layer publishes (before the queries write them from several threads).
void prepare_picks(const DeepseekV41Config& c, int layer, const ForwardBatch& b, V41Picks& picks) {
  const V41Layer& L = c.layers[layer];
  const int64_t T = b.num_tokens();
  if (L.ratio == 0) return;
  if (!L.runs_indexer) {
    DI_CHECK(picks.topk_layer == L.index_source,
             "V4.1 layer {} reads the top-k of layer {}, "
             "but layer {} wrote the last one",
             layer, L.index_source, picks.topk_layer);
    return;
  }
  picks.topk.resize(T * c.index_topk);
  picks.n_topk.assign(T, 0);
  picks.topk_layer = layer;
  if (L.uses_candidates)
    DI_CHECK(picks.candidate_layer == c.candidate_source,
             "V4.1 layer {} selects within candidates not yet published", layer);
  if (!L.publishes_candidates) return;
  picks.cand_indptr.assign(T + 1, 0);
  for (int64_t t = 0; t < T; ++t)
    picks.cand_indptr[t + 1] = picks.cand_indptr[t] + (b.positions[t] + 1) / L.ratio;
  picks.candidates.assign(picks.cand_indptr[T], 0);
  picks.candidate_layer = layer;
}

// attn [T, nh * D] -> out [T, hidden]: rope channels rotated back, then wo_a per group, wo_b.
void output_projection(const DeepseekV41Config& c, int layer, const V41Attention& w,
                       const ForwardBatch& b, V41AttnScratch& s, ForwardContext& ctx, float* out) {
  const int64_t T = b.num_tokens(), D = c.head_dim, nh = c.n_heads, G = c.o_groups,
                R = c.o_lora_rank;
  s.neg_pos.resize(T);
  for (int64_t t = 0; t < T; ++t) s.neg_pos[t] = -b.positions[t];
  rope_layer(c, c.layers[layer].ratio > 0, s.attn.data(), T, static_cast<int>(nh),
             static_cast<int>(D), s.neg_pos.data());
  s.grouped.resize(T * G * R);
  v4_grouped_projection(w.wo_a, static_cast<int>(G), R, s.attn.data(), T, nh * D, s.grouped.data(),
                        ctx);
  linear_forward(w.wo_b, s.grouped.data(), T, G * R, out, c.hidden, ctx);
}

}  // namespace

void v41_picks_reset(V41Picks& p) {
  p.topk_layer = -1;
  p.candidate_layer = -1;
}

void v41_attention_forward(const DeepseekV41Config& c, int layer, const V41Attention& w,
                           const ForwardBatch& b, const float* h, const V4LayerCache& own,
                           const V4LayerCache& source, V41Picks& picks, V41AttnScratch& s,
                           ForwardContext& ctx, float* out) {
  const int64_t T = b.num_tokens(), D = c.head_dim, nh = c.n_heads;
  const V41Layer& L = c.layers[layer];
  project(c, layer, w, b, h, own, s, ctx);
  if (L.owns_compressor) compress(c, layer, w, b, h, own, s, ctx);
  prepare_picks(c, layer, b, picks);
  s.attn.resize(T * nh * D);
  std::vector<int32_t> seq_of(T);
  for (int sq = 0; sq < b.num_seqs(); ++sq)
    for (int64_t t = b.seq_token_start[sq]; t < b.seq_token_start[sq + 1]; ++t) seq_of[t] = sq;
  // Every query's rows and entries were written above, and each writes only its own picks.
  v4_sink_attention_rows(T, static_cast<int>(nh), static_cast<int>(D), static_cast<const float*>(w.sinks.data),
                         s.q.data(), s.attn.data(), s.per_thread, ctx, [&](int64_t t, V4QueryScratch& qs) {
                           gather_keys(c, layer, own, source, b, seq_of[t], t, s, picks, qs);
                         });
  output_projection(c, layer, w, b, s, ctx, out);
}

}  // namespace deepinfer::model
