// The V4 attention block over paged state rows; scalar per query apart from the projections.
#include "deepinfer/model/deepseek_v4_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "deepinfer/base/check.h"
#include "deepinfer/base/timer.h"
#include "deepinfer/kernels/cpu/indexer_score.h"
#include "deepinfer/kernels/cpu/rope.h"
#include "deepinfer/kernels/cpu/sink_attention.h"
#include "deepinfer/model/layers/rms_norm.h"

namespace deepinfer::model {
namespace {

struct Rope {
  int rope_dim = 0;
  float theta = 0;
  kernels::RopeScaling scaling;
};

Rope rope_of(const DeepseekV4Config& c, bool compressed) {
  return compressed ? Rope{c.rope_dim, c.compress_theta, c.compress_scaling}
                    : Rope{c.rope_dim, c.main_theta, c.main_scaling};
}

void rope_tail(const Rope& r, float* x, int64_t T, int heads, int head_dim, int64_t stride,
               const int32_t* pos) {
  v4_rope_tail(r.rope_dim, r.theta, r.scaling, x, T, heads, head_dim, stride, pos);
}

V4CompressorDims compressor_dims(const DeepseekV4Config& c, int layer, const V4LayerCache& cache,
                                 bool indexer) {
  const V4Layer& L = c.layers[layer];
  const V4StateLayout& rl = cache.layout;
  V4CompressorDims d;
  d.dim = indexer ? c.index_head_dim : c.head_dim;
  d.ratio = L.ratio;
  d.overlap = indexer || L.attn == V4Attn::kCsa;
  d.rope_dim = c.rope_dim;
  d.theta = c.compress_theta;
  d.scaling = c.compress_scaling;
  d.eps = c.rms_eps;
  d.kv_off = indexer ? rl.idx_kv : rl.comp_kv;
  d.score_off = indexer ? rl.idx_score : rl.comp_score;
  d.entry_off = indexer ? rl.idx_entries : rl.comp_entries;
  return d;
}

// Projects a compressor's kv/score for all tokens and runs each sequence's step.
void compressor_forward(const V4CompressorDims& d, const V4Compressor& w, const ForwardBatch& b,
                        const float* h, int64_t hidden, const V4LayerCache& cache,
                        std::vector<float>& kv, std::vector<float>& score, ForwardContext& ctx) {
  const int64_t T = b.num_tokens(), width = d.width();
  kv.resize(T * width);
  score.resize(T * width);
  linear_forward(w.wkv, h, T, hidden, kv.data(), width, ctx);
  linear_forward(w.wgate, h, T, hidden, score.data(), width, ctx);
  for (int s = 0; s < b.num_seqs(); ++s) {
    const int64_t t0 = b.seq_token_start[s], n = b.seq_token_start[s + 1] - t0;
    v4_compressor_step(d, w, v4_seq_state(b, s, cache), kv.data() + t0 * width,
                       score.data() + t0 * width, b.positions.data() + t0, n);
  }
}

}  // namespace

V4SeqState v4_seq_state(const ForwardBatch& b, int s, const V4LayerCache& cache) {
  V4SeqState r;
  r.block_pool = cache.block_pool;
  r.recent_pool = cache.recent_pool;
  r.blocks = b.block_table.data() + b.block_table_indptr[s];
  r.slabs = b.recent_slab_table.data() + b.block_table_indptr[s];
  r.n_blocks = b.block_table_indptr[s + 1] - b.block_table_indptr[s];
  r.block_size = cache.block_size;
  r.block_floats = cache.layout.block_floats;
  r.recent_floats = cache.layout.recent_floats;
  if (!b.seq_replay_start.empty()) {
    r.window_floor = b.seq_replay_start[s];
    r.entries_from = b.seq_replay_end[s];
  }
  return r;
}

void v4_rope_tail(int rope_dim, float theta, const kernels::RopeScaling& scaling, float* x,
                  int64_t T, int heads, int head_dim, int64_t stride, const int32_t* pos) {
  if (T == 0) return;
  kernels::RopeParams p{};
  p.x = x + (head_dim - rope_dim);
  p.n_tokens = T;
  p.n_heads = heads;
  p.head_dim = head_dim;
  p.rot_dim = rope_dim;
  p.token_stride = stride;
  p.positions = pos;
  p.theta = theta;
  p.layout = kernels::RopeLayout::kInterleaved;
  p.scaling = scaling;
  kernels::rope(p);
}

void v4_grouped_projection(const LinearWeight& wo_a, int groups, int64_t rank, const float* in,
                           int64_t T, int64_t in_width, float* out, ForwardContext& ctx) {
  const int64_t G = groups, R = rank, in_g = in_width / G, block = wo_a.fp8_block;
  const bool fp8 = !wo_a.scale_inv.empty();
  DI_CHECK(!fp8 || G == 1 || R % block == 0,
           "grouped projection: FP8 blocks of {} rows straddle groups of {}", block, R);
  for (int64_t g = 0; g < G; ++g) {
    LinearWeight part = wo_a;
    part.weight.shape[0] = R;
    part.weight.data =
        static_cast<const uint8_t*>(wo_a.weight.data) + g * R * wo_a.weight.row_stride_bytes();
    if (fp8) {
      part.scale_inv.shape[0] = (R + block - 1) / block;
      part.scale_inv.data = static_cast<const float*>(wo_a.scale_inv.data) +
                            (g * R / block) * wo_a.scale_inv.shape[1];
    }
    linear_forward(part, in + g * in_g, T, in_width, out + g * R, G * R, ctx);
  }
}

void v4_sink_attention_rows(int64_t T, int n_heads, int head_dim, const float* sinks, const float* q,
                            float* out, std::vector<V4QueryScratch>& per_thread, ForwardContext& ctx,
                            const std::function<void(int64_t t, V4QueryScratch&)>& gather) {
  const int nt = ctx.pool->num_threads();
  if (static_cast<int>(per_thread.size()) < nt) per_thread.resize(nt);
  const int64_t row = int64_t(n_heads) * head_dim;
  ctx.pool->run([&](int ti, int n_threads) {
    V4QueryScratch& qs = per_thread[ti];
    kernels::SinkAttentionParams p{};
    p.n_heads = n_heads;
    p.head_dim = head_dim;
    p.sinks = sinks;
    p.scale = 1.0f / std::sqrt(float(head_dim));
    for (int64_t t = T * ti / n_threads; t < T * (ti + 1) / n_threads; ++t) {
      gather(t, qs);
      qs.scores.resize(qs.keys.size());
      p.q = q + t * row;
      p.keys = qs.keys.data();
      p.n_keys = static_cast<int64_t>(qs.keys.size());
      p.out = out + t * row;
      p.scores = qs.scores.data();
      kernels::sink_attention(p);
    }
  });
}

int v4_indexer_topk(const float* scores, int n_visible, int k, int32_t* out) {
  const int n = std::min(k, n_visible);
  std::vector<int32_t> order(n_visible);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  std::copy_n(order.begin(), n, out);
  return n;
}

namespace {

// Indexer scores of query t against its visible entries: sum_h w_h relu(q_h . k_s) / sqrt(Di).
void indexer_scores(const DeepseekV4Config& c, const float* iq, const float* iw,
                    const V4SeqState& st, int64_t entry_off, int ratio, int n_visible,
                    std::vector<const float*>& keys, float* out) {
  const int64_t Di = c.index_head_dim;
  keys.resize(n_visible);
  for (int e = 0; e < n_visible; ++e) keys[e] = st.entry(entry_off, Di, ratio, e);
  kernels::IndexerScoreParams p{iq, iw, c.index_n_heads, static_cast<int>(Di),
                                1.0f / std::sqrt(float(Di))};
  kernels::indexer_scores(p, keys.data(), n_visible, out);
}

// Keys of query token t (position p): the window rows, then the compressed entries it may use.
void gather_keys(const DeepseekV4Config& c, int layer, const V4StateLayout& rl,
                 const V4SeqState& st, int64_t p, int64_t t, const V4AttnScratch& a,
                 V4QueryScratch& s) {
  const V4Layer& L = c.layers[layer];
  s.keys.clear();
  for (int64_t q = std::max<int64_t>(st.window_floor, p - c.sliding_window + 1); q <= p; ++q)
    s.keys.push_back(st.row(q) + rl.kv);
  if (L.attn == V4Attn::kWindow) return;
  const int n_visible = static_cast<int>((p + 1) / L.ratio);
  if (L.attn == V4Attn::kHca) {
    for (int e = 0; e < n_visible; ++e)
      s.keys.push_back(st.entry(rl.comp_entries, c.head_dim, L.ratio, e));
    return;
  }
  s.isc.resize(std::max(n_visible, 1));
  s.topk.resize(std::max(n_visible, 1));
  const float* iq = a.iq.data() + t * c.index_n_heads * c.index_head_dim;
  const double t0 = now_seconds();
  indexer_scores(c, iq, a.iw.data() + t * c.index_n_heads, st, rl.idx_entries, L.ratio, n_visible,
                 s.entry_keys, s.isc.data());
  const int n = v4_indexer_topk(s.isc.data(), n_visible, c.index_topk, s.topk.data());
  s.index_seconds += now_seconds() - t0;
  for (int i = 0; i < n; ++i)
    s.keys.push_back(st.entry(rl.comp_entries, c.head_dim, L.ratio, s.topk[i]));
}

// q, kv and (CSA) the indexer's query and weights of every token; new K=V rows written.
void project(const DeepseekV4Config& c, int layer, const V4Attention& w, const ForwardBatch& b,
             const float* h, const V4LayerCache& cache, V4AttnScratch& s, ForwardContext& ctx) {
  const int64_t T = b.num_tokens(), H = c.hidden, D = c.head_dim, nh = c.n_heads;
  const V4Layer& L = c.layers[layer];
  const Rope rope = rope_of(c, L.attn != V4Attn::kWindow);
  s.qr.resize(T * c.q_lora_rank);
  s.q.resize(T * nh * D);
  s.kv.resize(T * D);
  linear_forward(w.wq_a, h, T, H, s.qr.data(), c.q_lora_rank, ctx);
  rms_norm_rows(s.qr.data(), c.q_lora_rank, w.q_norm, s.qr.data(), c.q_lora_rank, T, c.q_lora_rank,
                c.rms_eps);
  linear_forward(w.wq_b, s.qr.data(), T, c.q_lora_rank, s.q.data(), nh * D, ctx);
  rms_norm_unweighted(s.q.data(), T * nh, D, c.rms_eps);
  rope_tail(rope, s.q.data(), T, static_cast<int>(nh), static_cast<int>(D), nh * D,
            b.positions.data());
  linear_forward(w.wkv, h, T, H, s.kv.data(), D, ctx);
  rms_norm_rows(s.kv.data(), D, w.kv_norm, s.kv.data(), D, T, D, c.rms_eps);
  rope_tail(rope, s.kv.data(), T, 1, static_cast<int>(D), D, b.positions.data());
  for (int sq = 0; sq < b.num_seqs(); ++sq) {
    const V4SeqState st = v4_seq_state(b, sq, cache);
    for (int64_t t = b.seq_token_start[sq]; t < b.seq_token_start[sq + 1]; ++t)
      std::memcpy(st.row(b.positions[t]) + cache.layout.kv, s.kv.data() + t * D, sizeof(float) * D);
  }
  if (L.attn != V4Attn::kCsa) return;
  const int64_t nih = c.index_n_heads, Di = c.index_head_dim;
  s.iq.resize(T * nih * Di);
  s.iw.resize(T * nih);
  linear_forward(w.indexer.wq_b, s.qr.data(), T, c.q_lora_rank, s.iq.data(), nih * Di, ctx);
  rope_tail(rope_of(c, true), s.iq.data(), T, static_cast<int>(nih), static_cast<int>(Di), nih * Di,
            b.positions.data());
  linear_forward(w.indexer.weights_proj, h, T, H, s.iw.data(), nih, ctx);
  const float wscale = 1.0f / std::sqrt(float(nih));
  for (float& v : s.iw) v *= wscale;
}

// attn [T, nh * D] -> out [T, hidden]: rope channels rotated back, then wo_a per group, wo_b.
void output_projection(const DeepseekV4Config& c, int layer, const V4Attention& w,
                       const ForwardBatch& b, V4AttnScratch& s, ForwardContext& ctx, float* out) {
  const int64_t T = b.num_tokens(), D = c.head_dim, nh = c.n_heads, G = c.o_groups,
                R = c.o_lora_rank;
  s.neg_pos.resize(T);
  for (int64_t t = 0; t < T; ++t) s.neg_pos[t] = -b.positions[t];
  rope_tail(rope_of(c, c.layers[layer].attn != V4Attn::kWindow), s.attn.data(), T,
            static_cast<int>(nh), static_cast<int>(D), nh * D, s.neg_pos.data());
  s.grouped.resize(T * G * R);
  v4_grouped_projection(w.wo_a, static_cast<int>(G), R, s.attn.data(), T, nh * D, s.grouped.data(),
                        ctx);
  linear_forward(w.wo_b, s.grouped.data(), T, G * R, out, c.hidden, ctx);
}

}  // namespace

void v4_attention_forward(const DeepseekV4Config& c, int layer, const V4Attention& w,
                          const ForwardBatch& b, const float* h, const V4LayerCache& cache,
                          V4AttnScratch& s, ForwardContext& ctx, float* out) {
  const int64_t T = b.num_tokens(), D = c.head_dim, nh = c.n_heads;
  const V4Layer& L = c.layers[layer];
  project(c, layer, w, b, h, cache, s, ctx);
  const double c0 = now_seconds();
  if (L.attn != V4Attn::kWindow)
    compressor_forward(compressor_dims(c, layer, cache, false), w.compressor, b, h, c.hidden, cache,
                       s.ckv, s.cscore, ctx);
  if (L.attn == V4Attn::kCsa)
    compressor_forward(compressor_dims(c, layer, cache, true), w.indexer.compressor, b, h, c.hidden,
                       cache, s.ikv, s.iscore, ctx);
  s.compress_seconds += now_seconds() - c0;
  s.attn.resize(T * nh * D);
  s.seq_of.resize(T);
  for (int sq = 0; sq < b.num_seqs(); ++sq)
    for (int64_t t = b.seq_token_start[sq]; t < b.seq_token_start[sq + 1]; ++t) s.seq_of[t] = sq;
  // Every query's rows were written above.
  v4_sink_attention_rows(T, static_cast<int>(nh), static_cast<int>(D), static_cast<const float*>(w.sinks.data),
                         s.q.data(), s.attn.data(), s.per_thread, ctx, [&](int64_t t, V4QueryScratch& qs) {
                           gather_keys(c, layer, cache.layout, v4_seq_state(b, s.seq_of[t], cache),
                                       b.positions[t], t, s, qs);
                         });
  // Threads score in parallel: their mean time is the share of the wall time.
  const int nt = ctx.pool->num_threads();
  for (int ti = 0; ti < nt; ++ti)
    s.compress_seconds += std::exchange(s.per_thread[ti].index_seconds, 0.0) / nt;
  output_projection(c, layer, w, b, s, ctx, out);
}

}  // namespace deepinfer::model
