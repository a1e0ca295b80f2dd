// Token embedding lookup: gathers rows of a (possibly quantized) table as float.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deepinfer/base/status.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::kernels {

// out[k][0..dim) = dequantized table row ids[k], for k < n. Each row is row_bytes apart.
// Ids must be valid (see check_token_ids); the type must be dequantizable (can_dequantize).
void embedding_lookup(const void* table, DType type, size_t row_bytes, int64_t dim, const int32_t* ids,
                      int64_t n, float* out);

// invalid_argument naming the first id outside [0, n_vocab).
Status check_token_ids(const int32_t* ids, int64_t n, int64_t n_vocab);

}  // namespace deepinfer::kernels
