// Embedding lookup over a weight Tensor.
#include "deepinfer/model/layers/embedding.h"

#include "deepinfer/kernels/cpu/embedding.h"

namespace deepinfer::model {

void embed_tokens(const Tensor& table, int64_t hidden, const int32_t* ids, int64_t n, float* out) {
  kernels::embedding_lookup(table.data, table.dtype, table.row_stride_bytes(), hidden, ids, n, out);
}

}  // namespace deepinfer::model
