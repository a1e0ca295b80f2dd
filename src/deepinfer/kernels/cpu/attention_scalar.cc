// Scalar attention loops (the kScalar variant), the straightforward reference (materialized
// scores, softmax in double) and the K/V cache writer.
#include <cmath>
#include <cstring>
#include <vector>

#include "deepinfer/kernels/cpu/attention.h"
#include "deepinfer/kernels/cpu/attention_common.h"

namespace deepinfer::kernels {
namespace {

using detail::check_params;
using detail::elem_bytes;
using detail::key_range;
using detail::kv_offset;
using detail::load_elem;

template <DType T>
void qk_rows_scalar(const float* const* q, int nq, const void* const* k, int nk, int n, float scale,
                    float* const* out) {
  for (int r = 0; r < nq; ++r)
    for (int j = 0; j < nk; ++j) {
      float sum = 0.0f;
      for (int d = 0; d < n; ++d) sum += q[r][d] * load_elem(k[j], d, T);
      out[r][j] = sum * scale;
    }
}

template <DType T>
void pv_rows_scalar(float* const* acc, const float* const* w, int nr, const void* const* v, int nk, int n) {
  for (int r = 0; r < nr; ++r)
    for (int j = 0; j < nk; ++j)
      for (int d = 0; d < n; ++d) acc[r][d] += w[r][j] * load_elem(v[j], d, T);
}

float exp_sum_scalar(float* s, int n, float m) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += (s[i] = std::exp(s[i] - m));
  return sum;
}

}  // namespace

namespace detail {
AttentionOps attention_ops_scalar(DType kv_type) {
  switch (kv_type) {
    case DType::kF32: return {qk_rows_scalar<DType::kF32>, pv_rows_scalar<DType::kF32>, exp_sum_scalar};
    case DType::kF16: return {qk_rows_scalar<DType::kF16>, pv_rows_scalar<DType::kF16>, exp_sum_scalar};
    default: return {qk_rows_scalar<DType::kBF16>, pv_rows_scalar<DType::kBF16>, exp_sum_scalar};
  }
}
}  // namespace detail

void attention_reference(const AttentionParams& p) {
  check_params(p);
  const int group = p.n_heads / p.n_kv_heads;
  std::vector<double> scores, acc(p.v_head_dim);
  for (int si = 0; si < p.n_seqs; ++si) {
    const AttentionSeq& s = p.seqs[si];
    for (int t = 0; t < s.n_tokens; ++t) {
      const int64_t row = s.token_start + t;
      int64_t lo, hi;
      key_range(p, s.first_pos + t, &lo, &hi);
      for (int h = 0; h < p.n_heads; ++h) {
        const int g = h / group;
        const float* q = p.q + row * p.q_stride + static_cast<int64_t>(h) * p.head_dim;
        scores.assign(hi - lo + 1, 0.0);
        double mx = -INFINITY;
        for (int64_t key = lo; key <= hi; ++key) {
          const int64_t off = kv_offset(p, s, key, g, p.head_dim);
          double dot = 0;
          for (int d = 0; d < p.head_dim; ++d) dot += static_cast<double>(q[d]) * load_elem(p.k_cache, off + d, p.kv_type);
          scores[key - lo] = dot * p.scale;
          mx = std::max(mx, scores[key - lo]);
        }
        double sum = 0;
        for (double& x : scores) sum += (x = std::exp(x - mx));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t key = lo; key <= hi; ++key) {
          const int64_t off = kv_offset(p, s, key, g, p.v_head_dim);
          for (int d = 0; d < p.v_head_dim; ++d) acc[d] += scores[key - lo] * load_elem(p.v_cache, off + d, p.kv_type);
        }
        float* out = p.out + row * p.out_stride + static_cast<int64_t>(h) * p.v_head_dim;
        for (int d = 0; d < p.v_head_dim; ++d) out[d] = static_cast<float>(acc[d] / sum);
      }
    }
  }
}

void kv_cache_write(const KvWriteParams& p) {
  DI_CHECK(p.kv_type == DType::kF32 || p.kv_type == DType::kF16 || p.kv_type == DType::kBF16,
           "kv_cache_write: kv_type {} unsupported", dtype_name(p.kv_type));
  const size_t eb = elem_bytes(p.kv_type);
  auto store = [&](void* cache, int64_t off, const float* src, int64_t n) {
    if (n == 0) return;  // no V rows (MLA's latent cache)
    char* dst = static_cast<char*>(cache) + off * eb;
    if (p.kv_type == DType::kF32) {
      std::memcpy(dst, src, n * 4);
      return;
    }
    uint16_t* d16 = reinterpret_cast<uint16_t*>(dst);
    if (p.kv_type == DType::kF16) {
      for (int64_t i = 0; i < n; ++i) d16[i] = f32_to_f16(src[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) d16[i] = f32_to_bf16(src[i]);
    }
  };
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    const int32_t slot = p.slot_mapping[t];
    if (slot < 0) continue;
    const int64_t off = static_cast<int64_t>(slot / p.block_size) * p.block_stride + (slot % p.block_size) * p.token_stride;
    store(p.k_cache, off, p.k + t * p.k_stride, p.k_row_elems);
    store(p.v_cache, off, p.v + t * p.v_stride, p.v_row_elems);
  }
}

}  // namespace deepinfer::kernels
