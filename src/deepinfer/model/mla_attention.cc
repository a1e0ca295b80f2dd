// MLA forward: projections, RoPE on the decoupled parts, latent KV write, then per sequence the
// expanded (prefill) or weight-absorbed (decode) attention over the paged latent cache.
#include "deepinfer/model/mla_attention.h"

#include <algorithm>
#include <cstring>

#include "deepinfer/base/check.h"
#include "deepinfer/kernels/cpu/attention.h"
#include "deepinfer/tensor/quant.h"

namespace deepinfer::model {
namespace {

constexpr int64_t kMaxExpandedBytes = int64_t{256} << 20;
// At most this many new tokens of a sequence in a step (1 + the most speculative drafts) take the
// absorbed form in MlaMode::kAuto.
constexpr int kAbsorbedMaxTokens = 17;

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Decode form over the sequences in `seq_ids`: q_nope is absorbed through W_UK into latent space,
// one MQA pass attends over the cached [latent | k_pe] rows with the latent itself as the value,
// and the latent output goes through W_UV.
void attend_absorbed(const MlaWeights& w, const MlaDims& d, const ForwardBatch& batch,
                     const std::vector<int>& seq_ids, const MlaCache& cache, MlaScratch& s,
                     ForwardContext& ctx) {
  const int block_size = cache.block_size;
  const int H = d.n_heads, L = d.latent(), R = d.kv_lora_rank, qk = d.qk();
  const int64_t qs = int64_t{H} * qk;
  // Gather the rows of these sequences into a compact block.
  std::vector<int32_t> rows;
  std::vector<kernels::AttentionSeq> seqs;
  for (int sid : seq_ids) {
    const int32_t start = batch.seq_token_start[sid], n = batch.seq_token_start[sid + 1] - start;
    kernels::AttentionSeq as;
    as.token_start = static_cast<int32_t>(rows.size());
    as.n_tokens = n;
    as.context_len = batch.seq_context_len[sid];
    as.first_pos = as.context_len - n;
    as.block_table = batch.block_table.data() + batch.block_table_indptr[sid];
    seqs.push_back(as);
    for (int32_t t = 0; t < n; ++t) rows.push_back(start + t);
  }
  const int64_t Ta = static_cast<int64_t>(rows.size());
  grow(s.q_abs, Ta * H * L);
  grow(s.lat_out, Ta * H * R);
  grow(s.ctx_lat, Ta * std::max(qs, int64_t{H} * d.v));
  float* qc = s.ctx_lat.data();  // compact q rows
  for (int64_t i = 0; i < Ta; ++i) std::memcpy(qc + i * qs, s.q.data() + rows[i] * qs, sizeof(float) * qs);
  // Heads split over the pool's threads, each head's matmul on its own thread.
  ForwardContext serial = ctx;
  serial.pool = &inline_pool();
  serial.batch_invariant = true;  // our own kernels: no BLAS calls (and its threads) inside the region
  ctx.pool->parallel_for(H, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      linear_f32(w.w_uk_t.data() + h * R * d.nope, R, d.nope, qc + h * qk, Ta, qs, s.q_abs.data() + h * L,
                 int64_t{H} * L, serial);
      for (int64_t i = 0; i < Ta; ++i)
        std::memcpy(s.q_abs.data() + (i * H + h) * L + R, qc + i * qs + h * qk + d.nope, sizeof(float) * d.rope);
    }
  });
  kernels::AttentionParams ap{};
  ap.q = s.q_abs.data();
  ap.q_stride = int64_t{H} * L;
  ap.k_cache = cache.data;
  ap.v_cache = cache.data;  // the value is the latent: the first kv_lora_rank elements of a row
  ap.kv_type = cache.dtype;
  ap.block_stride = int64_t{block_size} * L;
  ap.token_stride = L;
  ap.block_size = block_size;
  ap.n_heads = H;
  ap.n_kv_heads = 1;
  ap.head_dim = L;
  ap.v_head_dim = R;
  ap.sliding_window = 0;
  ap.scale = d.softmax_scale;
  ap.out = s.lat_out.data();
  ap.out_stride = int64_t{H} * R;
  ap.seqs = seqs.data();
  ap.n_seqs = static_cast<int>(seqs.size());
  kernels::attention(ap, *ctx.pool);
  const int64_t os = int64_t{H} * d.v;
  float* oc = s.ctx_lat.data();  // compact outputs (q rows are no longer needed)
  ctx.pool->parallel_for(H, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h)
      linear_f32(w.w_uv.data() + h * d.v * R, d.v, R, s.lat_out.data() + h * R, Ta, int64_t{H} * R, oc + h * d.v,
                 os, serial);
  });
  for (int64_t i = 0; i < Ta; ++i) std::memcpy(s.attn.data() + rows[i] * os, oc + i * os, sizeof(float) * os);
}

// Prefill form for one sequence: its whole context's latents go through kv_b_proj into per-head
// K (k_nope | shared k_pe) and V, then ordinary causal attention over them.
void attend_expanded(const MlaWeights& w, const MlaDims& d, const ForwardBatch& batch, int sid,
                     const MlaCache& cache, MlaScratch& s, ForwardContext& ctx) {
  const int block_size = cache.block_size;
  const int H = d.n_heads, L = d.latent(), R = d.kv_lora_rank, qk = d.qk();
  const int64_t C = batch.seq_context_len[sid];
  const int32_t start = batch.seq_token_start[sid], n = batch.seq_token_start[sid + 1] - start;
  const int32_t* bt = batch.block_table.data() + batch.block_table_indptr[sid];
  grow(s.ctx_lat, C * L);
  const size_t row_bytes = deepinfer::row_bytes(cache.dtype, L);
  for (int64_t p = 0; p < C; ++p) {
    const int64_t slot = int64_t{bt[p / block_size]} * block_size + p % block_size;
    const Status st = dequantize_row(cache.dtype, static_cast<const std::byte*>(cache.data) + slot * row_bytes,
                                     s.ctx_lat.data() + p * L, L);
    DI_CHECK(st.is_ok(), "MLA latent read: {}", st.message());
  }
  const int64_t kvb_stride = int64_t{H} * (d.nope + d.v);
  grow(s.kvb, C * kvb_stride);
  linear_forward(w.kv_b_proj, s.ctx_lat.data(), C, L, s.kvb.data(), kvb_stride, ctx);
  // K and V share one token stride in the attention kernel's addressing.
  const int64_t ks = int64_t{H} * std::max(qk, d.v);
  grow(s.k_exp, C * ks);
  grow(s.v_exp, C * ks);
  for (int64_t p = 0; p < C; ++p) {
    const float* src = s.kvb.data() + p * kvb_stride;
    for (int h = 0; h < H; ++h) {
      float* k = s.k_exp.data() + p * ks + int64_t{h} * qk;
      std::memcpy(k, src + int64_t{h} * (d.nope + d.v), sizeof(float) * d.nope);
      std::memcpy(k + d.nope, s.ctx_lat.data() + p * L + R, sizeof(float) * d.rope);
      std::memcpy(s.v_exp.data() + p * ks + int64_t{h} * d.v, src + int64_t{h} * (d.nope + d.v) + d.nope,
                  sizeof(float) * d.v);
    }
  }
  const int32_t block0 = 0;
  kernels::AttentionSeq as;
  as.token_start = start;
  as.n_tokens = n;
  as.context_len = C;
  as.first_pos = C - n;
  as.block_table = &block0;  // the expanded context is one block of C tokens
  kernels::AttentionParams ap{};
  ap.q = s.q.data();
  ap.q_stride = int64_t{H} * qk;
  ap.k_cache = s.k_exp.data();
  ap.v_cache = s.v_exp.data();
  ap.kv_type = DType::kF32;
  ap.block_stride = C * ks;
  ap.token_stride = ks;
  ap.block_size = static_cast<int>(C);
  ap.n_heads = H;
  ap.n_kv_heads = H;
  ap.head_dim = qk;
  ap.v_head_dim = d.v;
  ap.sliding_window = 0;
  ap.scale = d.softmax_scale;
  ap.out = s.attn.data();
  ap.out_stride = int64_t{H} * d.v;
  ap.seqs = &as;
  ap.n_seqs = 1;
  kernels::attention(ap, *ctx.pool);
}

}  // namespace

Result<MlaWeights> load_mla(const DeepseekWeights& ws, const std::string& prefix, const MlaDims& d) {
  MlaWeights w;
  const int64_t H = d.n_heads, qs = H * d.qk();
  if (d.q_lora_rank > 0) {
    DI_ASSIGN_OR_RETURN(w.q_a_proj, ws.linear(prefix + ".q_a_proj", d.q_lora_rank, d.hidden));
    DI_ASSIGN_OR_RETURN(w.q_a_norm, ws.get_f32(prefix + ".q_a_layernorm.weight", {d.q_lora_rank}));
    DI_ASSIGN_OR_RETURN(w.q_b_proj, ws.linear(prefix + ".q_b_proj", qs, d.q_lora_rank));
  } else {
    DI_ASSIGN_OR_RETURN(w.q_proj, ws.linear(prefix + ".q_proj", qs, d.hidden));
  }
  DI_ASSIGN_OR_RETURN(w.kv_a_proj, ws.linear(prefix + ".kv_a_proj_with_mqa", d.latent(), d.hidden));
  DI_ASSIGN_OR_RETURN(w.kv_a_norm, ws.get_f32(prefix + ".kv_a_layernorm.weight", {d.kv_lora_rank}));
  DI_ASSIGN_OR_RETURN(w.kv_b_proj, ws.linear(prefix + ".kv_b_proj", H * (d.nope + d.v), d.kv_lora_rank));
  DI_ASSIGN_OR_RETURN(w.o_proj, ws.linear(prefix + ".o_proj", d.hidden, H * d.v));
  DI_ASSIGN_OR_RETURN(std::vector<float> kvb, linear_to_f32(w.kv_b_proj, prefix + ".kv_b_proj.weight"));
  const int64_t R = d.kv_lora_rank;
  w.w_uk_t.resize(H * R * d.nope);
  w.w_uv.resize(H * d.v * R);
  for (int64_t h = 0; h < H; ++h) {
    const float* base = kvb.data() + h * (d.nope + d.v) * R;
    for (int64_t j = 0; j < d.nope; ++j)
      for (int64_t c = 0; c < R; ++c) w.w_uk_t[(h * R + c) * d.nope + j] = base[j * R + c];
    std::memcpy(w.w_uv.data() + h * d.v * R, base + int64_t{d.nope} * R, sizeof(float) * d.v * R);
  }
  return w;
}

Status mla_forward(const MlaWeights& w, const MlaDims& d, MlaMode mode, const ForwardBatch& batch,
                   const float* x, const MlaCache& cache, MlaScratch& s, ForwardContext& ctx, float* out) {
  const int64_t T = batch.num_tokens();
  const int H = d.n_heads, L = d.latent(), R = d.kv_lora_rank;
  const int64_t qs = int64_t{H} * d.qk();
  grow(s.q, T * qs);
  grow(s.kv, T * L);
  grow(s.attn, T * H * d.v);
  if (d.q_lora_rank > 0) {
    grow(s.qa, T * d.q_lora_rank);
    linear_forward(w.q_a_proj, x, T, d.hidden, s.qa.data(), d.q_lora_rank, ctx);
    rms_norm_rows(s.qa.data(), d.q_lora_rank, w.q_a_norm, s.qa.data(), d.q_lora_rank, T, d.q_lora_rank, d.eps);
    linear_forward(w.q_b_proj, s.qa.data(), T, d.q_lora_rank, s.q.data(), qs, ctx);
  } else {
    linear_forward(w.q_proj, x, T, d.hidden, s.q.data(), qs, ctx);
  }
  linear_forward(w.kv_a_proj, x, T, d.hidden, s.kv.data(), L, ctx);
  rms_norm_rows(s.kv.data(), L, w.kv_a_norm, s.kv.data(), L, T, R, d.eps);

  kernels::RopeParams rp;
  rp.x = s.q.data() + d.nope;
  rp.n_tokens = T;
  rp.n_heads = H;
  rp.head_dim = d.qk();
  rp.rot_dim = d.rope;
  rp.token_stride = qs;
  rp.positions = batch.positions.data();
  rp.theta = d.rope_theta;
  rp.layout = d.rope_layout;
  rp.scaling = d.rope_scaling;
  kernels::rope(rp);
  rp.x = s.kv.data() + R;
  rp.n_heads = 1;
  rp.head_dim = d.rope;
  rp.token_stride = L;
  kernels::rope(rp);

  kernels::KvWriteParams kw{};  // one latent row per token; no separate V
  kw.k = s.kv.data();
  kw.k_stride = L;
  kw.v = s.kv.data();
  kw.v_stride = L;
  kw.n_tokens = T;
  kw.slot_mapping = batch.slot_mapping.data();
  kw.k_cache = cache.data;
  kw.v_cache = cache.data;
  kw.kv_type = cache.dtype;
  kw.block_size = cache.block_size;
  kw.block_stride = int64_t{cache.block_size} * L;
  kw.token_stride = L;
  kw.k_row_elems = L;
  kw.v_row_elems = 0;
  kernels::kv_cache_write(kw);

  std::vector<int> absorbed;
  for (int sid = 0; sid < batch.num_seqs(); ++sid) {
    const int n = batch.seq_token_start[sid + 1] - batch.seq_token_start[sid];
    if (n == 0) continue;
    // The expanded form materializes K and V for the whole context; past a budget (long
    // contexts on wide models: 128 heads x 32k tokens would be GBs) the absorbed form, equal in
    // value, takes over; so does it for a few new tokens (a decode step, or one verifying
    // speculative drafts), where expanding the whole context for them costs far more than the
    // absorbed form's per-token work. Batch-invariant mode always takes the absorbed form: which form runs
    // must not depend on how many of the sequence's tokens share the step (a chunked prompt, a
    // decode step, a step verifying speculative drafts), or the same position would round
    // differently.
    const int64_t expanded_bytes = int64_t{batch.seq_context_len[sid]} * 2 * H * std::max(d.qk(), d.v) *
                                   int64_t{sizeof(float)};
    if (mode == MlaMode::kAbsorbed ||
        (mode == MlaMode::kAuto &&
         (n <= kAbsorbedMaxTokens || ctx.batch_invariant || expanded_bytes > kMaxExpandedBytes))) {
      absorbed.push_back(sid);
    } else {
      attend_expanded(w, d, batch, sid, cache, s, ctx);
    }
  }
  if (!absorbed.empty()) attend_absorbed(w, d, batch, absorbed, cache, s, ctx);
  linear_forward(w.o_proj, s.attn.data(), T, int64_t{H} * d.v, out, d.hidden, ctx);
  return Status::ok();
}

}  // namespace deepinfer::model
