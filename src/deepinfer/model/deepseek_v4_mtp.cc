// DeepSeek-V4's MTP draft head (DeepSeek's MTPBlock, mtp.0): from the main model's final
// hyper-connection streams H [T, hc, hidden] at positions t and the tokens t+1,
//   x[t, i] = e_proj(enorm(embed(token t+1))) + h_proj(hnorm(H[t, i]))
// then one window-only decoder block with its own mHC and MoE (the same blocks as a main layer),
// then its own hyper-connection head and norm, and the main model's head. Its window state is
// its own hybrid KvCache (one window layer: recent rows only), written through the same
// V4LayerCache as a main layer's.
#include <algorithm>
#include <cstring>

#include "deepinfer/kernels/cpu/embedding.h"  // check_token_ids
#include "deepinfer/model/deepseek_v4.h"
#include "deepinfer/model/deepseek_v4_state.h"
#include "deepinfer/model/layers/embedding.h"
#include "deepinfer/model/layers/rms_norm.h"

namespace deepinfer::model {
namespace {

// The batch against the MTP cache: one window layer's recent rows; new tokens continue each
// sequence's cached prefix and the window rows they read are still there.
Status check_mtp_batch(const ForwardBatch& b, const KvCache& cache, const KvCacheSpec& want,
                       int64_t vocab) {
  if (cache.spec.num_layers != want.num_layers || cache.spec.state_kinds.size() != 1 ||
      cache.spec.recent_row_floats(0) != want.recent_row_floats(0) || cache.recent.size() != 1 ||
      cache.num_recent_slabs <= 0)
    return invalid_argument(
        "deepseek_v4 MTP: the cache ({} layers, {} state kinds, {} recent slabs) is not "
        "mtp_kv_cache_spec() (1 window layer of {} floats per token)",
        cache.spec.num_layers, cache.spec.state_kinds.size(), cache.num_recent_slabs,
        want.recent_row_floats(0));
  DI_RETURN_IF_ERROR(kernels::check_token_ids(b.token_ids.data(), b.num_tokens(), vocab));
  if (b.recent_slab_table.size() != b.block_table.size())
    return invalid_argument("deepseek_v4 MTP: the batch has {} recent slabs for {} blocks",
                            b.recent_slab_table.size(), b.block_table.size());
  for (int s = 0; s < b.num_seqs(); ++s) {
    const int32_t t0 = b.seq_token_start[s], t1 = b.seq_token_start[s + 1];
    const int64_t blocks = b.block_table_indptr[s + 1] - b.block_table_indptr[s];
    if (int64_t{b.seq_context_len[s]} > blocks * cache.block_size)
      return invalid_argument("deepseek_v4 MTP: sequence {} has {} tokens but {} blocks", s,
                              b.seq_context_len[s], blocks);
    for (int32_t t = t0; t < t1; ++t)
      if (b.positions[t] != b.seq_context_len[s] - (t1 - t))
        return invalid_argument(
            "deepseek_v4 MTP: sequence {}'s new tokens are not the continuation of its cache", s);
    const int64_t first_read =
        std::max<int64_t>(0, b.seq_context_len[s] - (t1 - t0) - want.recent_tokens);
    for (int64_t j = first_read / cache.block_size; j < blocks; ++j) {
      const int32_t slab = b.recent_slab_table[b.block_table_indptr[s] + j];
      if (slab < 0 || slab >= cache.num_recent_slabs)
        return invalid_argument(
            "deepseek_v4 MTP: sequence {}'s block {} has no recent rows (slab {}) but is read", s,
            j, slab);
    }
  }
  for (int32_t row : b.logits_rows)
    if (row < 0 || row >= b.num_tokens())
      return invalid_argument("deepseek_v4 MTP: logits row {} outside the batch of {}", row,
                              b.num_tokens());
  return Status::ok();
}

}  // namespace

KvCacheSpec DeepseekV4::mtp_kv_cache_spec() const {
  KvCacheSpec spec;
  spec.num_layers = 1;
  spec.state_kinds.push_back({"mtp_window_kv", 0, v4_.head_dim, 1, true});
  spec.recent_tokens = mtp_cfg_.sliding_window;
  return spec;
}

Status DeepseekV4::mtp_forward(const ForwardBatch& b, const float* prev_streams, KvCache& mtp_cache,
                               ForwardContext& ctx, float* logits, float* hidden_out) {
  if (w_.mtp.empty()) return unsupported("deepseek_v4: this checkpoint has no MTP layer (mtp.0.*)");
  DI_RETURN_IF_ERROR(check_mtp_batch(b, mtp_cache, mtp_kv_cache_spec(), v4_.vocab_size));
  const V4MtpWeights& m = w_.mtp[0];
  const V4LayerWeights& L = m.block;
  V4MtpScratch& s = mtp_scratch_;
  const int64_t T = b.num_tokens(), H = v4_.hidden, hc = v4_.hc_mult;
  const float eps = v4_.rms_eps;
  s.x.resize(T * hc * H);
  s.e.resize(T * H);
  s.normed.resize(T * hc * H);
  s.collapsed.resize(T * H);
  s.out.resize(T * H);
  // Inputs: e_proj of the normed embedding, broadcast onto h_proj of every normed stream.
  embed_tokens(w_.embed, H, b.token_ids.data(), T, s.collapsed.data());
  rms_norm_rows(s.collapsed.data(), H, m.enorm, s.collapsed.data(), H, T, H, eps);
  linear_forward(m.e_proj, s.collapsed.data(), T, H, s.e.data(), H, ctx);
  rms_norm_rows(prev_streams, H, m.hnorm, s.normed.data(), H, T * hc, H, eps);
  linear_forward(m.h_proj, s.normed.data(), T * hc, H, s.x.data(), H, ctx);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < hc; ++i) {
      float* xs = s.x.data() + (t * hc + i) * H;
      const float* et = s.e.data() + t * H;
      for (int64_t c = 0; c < H; ++c) xs[c] += et[c];
    }
  // The block, as a main window layer: attention over its own window state, then the MoE.
  v4_hc_pre(hc_, L.hc_attn, s.x.data(), T, s.collapsed.data(), s.hc, ctx);
  rms_norm_rows(s.collapsed.data(), H, L.attn_norm, s.normed.data(), H, T, H, eps);
  const V4LayerCache lc{mtp_cache.block_state[0].data(), mtp_cache.recent[0].data(),
                        mtp_cache.block_size,
                        v4_state_layout(mtp_cfg_, v4_.num_layers, mtp_cache.block_size)};
  v4_attention_forward(mtp_cfg_, v4_.num_layers, L.attn, b, s.normed.data(), lc, s.attn, ctx,
                       s.out.data());
  v4_hc_post(hc_, s.hc, s.out.data(), T, s.x.data());
  v4_hc_pre(hc_, L.hc_ffn, s.x.data(), T, s.collapsed.data(), s.hc, ctx);
  rms_norm_rows(s.collapsed.data(), H, L.ffn_norm, s.normed.data(), H, T, H, eps);
  v4_moe_forward(moe_, L.moe, s.normed.data(), b.token_ids.data(), T, s.out.data(), nullptr, s.moe,
                 ctx);
  v4_hc_post(hc_, s.hc, s.out.data(), T, s.x.data());
  if (hidden_out) std::memcpy(hidden_out, s.x.data(), sizeof(float) * static_cast<size_t>(T * hc * H));
  // Head: the MTP's own hyper-connection head and norm, the main model's output projection.
  const int64_t R = static_cast<int64_t>(b.logits_rows.size());
  s.rows.resize(R * H);
  for (int64_t r = 0; r < R; ++r)
    v4_hc_head(hc_, m.hc_head, s.x.data() + int64_t{b.logits_rows[r]} * hc * H, 1, hc * H,
               s.rows.data() + r * H, ctx);
  rms_norm_rows(s.rows.data(), H, m.norm, s.rows.data(), H, R, H, eps);
  linear_forward(w_.head, s.rows.data(), R, H, logits, v4_.vocab_size, ctx);
  return Status::ok();
}

}  // namespace deepinfer::model
