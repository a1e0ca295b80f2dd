// GQA block: projections, RoPE, paged KV write, paged attention, output projection.
#include "deepinfer/model/layers/gqa_attention.h"

namespace deepinfer::model {

std::vector<kernels::AttentionSeq> attention_seqs(const ForwardBatch& batch) {
  std::vector<kernels::AttentionSeq> seqs(batch.num_seqs());
  for (int s = 0; s < batch.num_seqs(); ++s) {
    const int32_t start = batch.seq_token_start[s];
    const int32_t n = batch.seq_token_start[s + 1] - start;
    seqs[s].token_start = start;
    seqs[s].n_tokens = n;
    seqs[s].context_len = batch.seq_context_len[s];
    seqs[s].first_pos = batch.seq_context_len[s] - n;
    seqs[s].block_table = batch.block_table.data() + batch.block_table_indptr[s];
  }
  return seqs;
}

void gqa_attention_forward(const GqaWeights& w, const GqaDims& d, const ForwardBatch& batch,
                           const std::vector<kernels::AttentionSeq>& seqs, const float* x, int64_t hidden,
                           const GqaCache& cache, const GqaBuffers& buf, ForwardContext& ctx, float* out) {
  const int block_size = cache.block_size;
  const int64_t T = batch.num_tokens();
  const int64_t q_dim = d.q_dim(), kv_dim = d.kv_dim();
  const LinearTarget qkv[] = {{&w.wq, buf.q, q_dim}, {&w.wk, buf.k, kv_dim}, {&w.wv, buf.v, kv_dim}};
  linear_forward_shared(qkv, x, T, hidden, ctx);

  kernels::RopeParams rope;
  rope.n_tokens = T;
  rope.head_dim = d.head_dim;
  rope.rot_dim = d.rope_dim;
  rope.positions = batch.positions.data();
  rope.theta = d.rope_theta;
  rope.layout = d.rope_layout;
  rope.scaling = d.rope_scaling;
  rope.x = buf.q;
  rope.n_heads = d.n_heads;
  rope.token_stride = q_dim;
  kernels::rope(rope);
  rope.x = buf.k;
  rope.n_heads = d.n_kv_heads;
  rope.token_stride = kv_dim;
  kernels::rope(rope);

  kernels::KvWriteParams kw;
  kw.k = buf.k;
  kw.k_stride = kv_dim;
  kw.v = buf.v;
  kw.v_stride = kv_dim;
  kw.n_tokens = T;
  kw.slot_mapping = batch.slot_mapping.data();
  kw.k_cache = cache.k;
  kw.v_cache = cache.v;
  kw.kv_type = cache.dtype;
  kw.block_size = block_size;
  kw.block_stride = kv_dim * block_size;
  kw.token_stride = kv_dim;
  kw.k_row_elems = kv_dim;
  kw.v_row_elems = kv_dim;
  kernels::kv_cache_write(kw);

  kernels::AttentionParams ap;
  ap.q = buf.q;
  ap.q_stride = q_dim;
  ap.k_cache = cache.k;
  ap.v_cache = cache.v;
  ap.kv_type = cache.dtype;
  ap.block_size = block_size;
  ap.token_stride = kv_dim;
  ap.block_stride = kv_dim * block_size;
  ap.n_heads = d.n_heads;
  ap.n_kv_heads = d.n_kv_heads;
  ap.head_dim = d.head_dim;
  ap.v_head_dim = d.head_dim;
  ap.sliding_window = 0;
  ap.scale = d.softmax_scale;
  ap.out = buf.attn;
  ap.out_stride = q_dim;
  ap.seqs = seqs.data();
  ap.n_seqs = static_cast<int>(seqs.size());
  kernels::attention(ap, *ctx.pool);

  linear_forward(w.wo, buf.attn, T, q_dim, out, hidden, ctx);
}

}  // namespace deepinfer::model
