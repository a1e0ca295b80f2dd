// Helpers shared by the attention kernel and its scalar reference: element loads, key ranges,
// cache offsets, parameter checks. Internal to kernels/cpu/attention*.
#pragma once

#include <algorithm>
#include <cstdint>

#include "deepinfer/base/check.h"
#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/attention.h"

namespace deepinfer::kernels::detail {

inline size_t elem_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

inline float load_elem(const void* base, int64_t i, DType t) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    default: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
  }
}

inline void check_params(const AttentionParams& p) {
  DI_CHECK(p.kv_type == DType::kF32 || p.kv_type == DType::kF16 || p.kv_type == DType::kBF16,
           "attention: kv_type {} unsupported", dtype_name(p.kv_type));
  DI_CHECK(p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0, "attention: n_heads {} n_kv_heads {}",
           p.n_heads, p.n_kv_heads);
  DI_CHECK(p.block_size > 0 && p.head_dim > 0 && p.v_head_dim > 0, "attention: bad sizes");
  for (int s = 0; s < p.n_seqs; ++s)
    DI_CHECK(p.seqs[s].context_len >= p.seqs[s].first_pos + p.seqs[s].n_tokens && p.seqs[s].first_pos >= 0,
             "attention: seq {} context_len {} < first_pos {} + n_tokens {}", s, p.seqs[s].context_len,
             p.seqs[s].first_pos, p.seqs[s].n_tokens);
}

// Key range [lo, hi] of the query at position pos.
inline void key_range(const AttentionParams& p, int64_t pos, int64_t* lo, int64_t* hi) {
  *hi = pos;
  *lo = p.sliding_window > 0 ? std::max<int64_t>(0, pos - p.sliding_window + 1) : 0;
}

inline int64_t kv_offset(const AttentionParams& p, const AttentionSeq& s, int64_t key, int kv_head, int dim) {
  const int64_t block = s.block_table[key / p.block_size];
  return block * p.block_stride + (key % p.block_size) * p.token_stride + static_cast<int64_t>(kv_head) * dim;
}

}  // namespace deepinfer::kernels::detail
