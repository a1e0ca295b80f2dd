// Token embedding: rows of an embedding table (any type kernels::embedding_lookup takes) gathered
// into f32 activations.
#pragma once

#include <cstdint>

#include "deepinfer/tensor/tensor.h"

namespace deepinfer::model {

// out[t] = table[ids[t]] as f32, [n, hidden]. Ids must already be checked against the table.
void embed_tokens(const Tensor& table, int64_t hidden, const int32_t* ids, int64_t n, float* out);

}  // namespace deepinfer::model
