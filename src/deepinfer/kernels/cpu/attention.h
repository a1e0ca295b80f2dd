// Paged attention for mixed batches (prefill chunks and decode rows of many sequences in one
// call), plus the helper that writes new K/V rows into the paged cache.
//
// Determinism: every query row (token, head) keeps its own online-softmax state and visits its
// keys in fixed chunks of kAttentionKeyChunk absolute positions, in ascending order. Which rows
// share a work item or a thread never changes a row's arithmetic, so a row's output is bitwise
// identical whatever else is in the batch and however many threads run (for a given ISA).
#pragma once

#include <cstdint>

#include "deepinfer/base/cpu_features.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer {
class ThreadPool;
}

namespace deepinfer::kernels {

inline constexpr int kAttentionKeyChunk = 64;
// Keys are also grouped in fixed segments of absolute positions. Each segment gets its own
// online-softmax state, merged into the row's total in segment order. That lets a long row be
// split across threads (one piece per segment, merged afterwards) with bitwise the same result
// as computing it in one piece, so splitting can follow the load without breaking invariance.
inline constexpr int64_t kAttentionKeySegment = 1024;

struct AttentionSeq {             // one sequence's slice of the batch
  int32_t token_start;            // first row of its new tokens in q / out
  int32_t n_tokens;               // number of new tokens
  int64_t first_pos;              // position of its first new token; token i (p = first_pos + i)
                                  // attends keys [max(0, p - window + 1), p] (causal)
  int64_t context_len;            // keys available in the cache (= first_pos + n_tokens)
  const int32_t* block_table;     // [ceil(context_len / block_size)] physical block ids
};

struct AttentionParams {
  const float* q;                 // [n_tokens, n_heads * head_dim]
  int64_t q_stride;               // floats between q rows
  const void* k_cache;            // element (block, slot, kv_head, d) at
  const void* v_cache;            //   block * block_stride + slot * token_stride + kv_head * dim + d
  DType kv_type;                  // kF32, kF16 or kBF16
  int64_t block_stride;           // elements between blocks
  int64_t token_stride;           // elements between tokens of a block
  int block_size;
  int n_heads;
  int n_kv_heads;                 // GQA: head h reads kv head h / (n_heads / n_kv_heads)
  int head_dim;                   // K (and Q) head size
  int v_head_dim;                 // V (and output) head size
  int sliding_window;             // 0 = unlimited
  float scale;                    // usually 1 / sqrt(head_dim)
  float* out;                     // [n_tokens, n_heads * v_head_dim]
  int64_t out_stride;             // floats between out rows
  const AttentionSeq* seqs;       // [n_seqs]
  int n_seqs;
};

// Tiled, multi-threaded, online softmax (the production path).
void attention(const AttentionParams& p, ThreadPool& pool);
void attention_with_isa(const AttentionParams& p, ThreadPool& pool, IsaLevel isa);
// Straightforward per-row scalar version: materialized scores, softmax in double.
void attention_reference(const AttentionParams& p);

struct KvWriteParams {
  const float* k;                 // [n_tokens, k_stride] rows of n_kv_heads * head_dim
  int64_t k_stride;
  const float* v;                 // [n_tokens, v_stride] rows of n_kv_heads * v_head_dim
  int64_t v_stride;
  int64_t n_tokens;
  const int32_t* slot_mapping;    // [n_tokens] flat slot = block * block_size + slot; < 0 = skip
  void* k_cache;
  void* v_cache;
  DType kv_type;                  // kF32, kF16 or kBF16
  int block_size;
  int64_t block_stride;           // elements, as in AttentionParams
  int64_t token_stride;
  int64_t k_row_elems;            // n_kv_heads * head_dim
  int64_t v_row_elems;            // n_kv_heads * v_head_dim; 0 = no V rows (v, v_cache unused)
};

// Converts and stores the rows (round to nearest even for f16/bf16).
void kv_cache_write(const KvWriteParams& p);

namespace detail {
// Per-ISA inner loops of attention. Each works on up to kAttentionOpRows query rows at once so
// a K or V row is loaded (and converted from f16/bf16) once for all of them; a row's arithmetic
// is the same whatever the other rows are, which keeps results batch invariant.
inline constexpr int kAttentionOpRows = 4;
struct AttentionOps {
  // out[r][j] = scale * sum_d q[r][d] * k[j][d] for j < nk, r < nq <= kAttentionOpRows.
  void (*qk_rows)(const float* const* q, int nq, const void* const* k, int nk, int n, float scale,
                  float* const* out);
  // acc[r][d] += w[r][j] * v[j][d] for j = 0..nk-1 in that order, r < nr <= kAttentionOpRows
  // (accumulators stay in registers across the keys).
  void (*pv_rows)(float* const* acc, const float* const* w, int nr, const void* const* v, int nk, int n);
  // s[i] = exp(s[i] - m) for i < n; returns the sum of the new s.
  float (*exp_sum)(float* s, int n, float m);
};
AttentionOps attention_ops_scalar(DType kv_type);
AttentionOps attention_ops_avx2(DType kv_type);
AttentionOps attention_ops_avx512(DType kv_type);
}  // namespace detail

}  // namespace deepinfer::kernels
