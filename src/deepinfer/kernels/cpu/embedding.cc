// Embedding rows are dequantized one by one with the fast (SIMD) dequantizer.
#include "deepinfer/kernels/cpu/embedding.h"

#include "deepinfer/base/check.h"
#include "deepinfer/kernels/cpu/dequantize.h"

namespace deepinfer::kernels {

void embedding_lookup(const void* table, DType type, size_t row_bytes, int64_t dim, const int32_t* ids,
                      int64_t n, float* out) {
  const auto* base = static_cast<const uint8_t*>(table);
  for (int64_t k = 0; k < n; ++k) {
    DI_CHECK(ids[k] >= 0, "embedding_lookup: negative token id {}", ids[k]);
    const Status s = dequantize_row_fast(type, base + static_cast<size_t>(ids[k]) * row_bytes, out + k * dim, dim);
    DI_CHECK(s.is_ok(), "embedding_lookup: {}", s.message());
  }
}

Status check_token_ids(const int32_t* ids, int64_t n, int64_t n_vocab) {
  for (int64_t k = 0; k < n; ++k)
    if (ids[k] < 0 || ids[k] >= n_vocab)
      return invalid_argument("token id {} at position {} is outside the vocabulary [0, {})", ids[k], k, n_vocab);
  return Status::ok();
}

}  // namespace deepinfer::kernels
