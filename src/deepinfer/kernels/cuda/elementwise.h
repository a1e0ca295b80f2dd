// CUDA row kernels mirroring kernels/cpu: RMSNorm, RoPE, SiLU/SwiGLU, softmax and embedding
// lookup. Every pointer in a params struct is device memory; launches are asynchronous on the
// given stream. checks.h validates params on the host (invalid_argument naming the field); the
// launchers treat invalid params as bugs. This header stays free of fmt so nvcc compiles little.
// Each row is reduced by one thread block in a fixed order that depends only on the row's length,
// so a row's bits never depend on the batch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "deepinfer/kernels/cpu/rope.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::cuda {

struct RmsNormParams {
  const float* x = nullptr;  // [rows, x_stride]
  const float* w = nullptr;  // [dim]; nullptr = unit scale
  float* y = nullptr;        // [rows, y_stride]; may equal x
  int64_t rows = 0;
  int64_t dim = 0;
  int64_t x_stride = 0;  // floats between rows of x
  int64_t y_stride = 0;  // floats between rows of y
  float eps = 1e-6f;
};
void rms_norm(const RmsNormParams& p, cudaStream_t stream);

// As kernels::RopeParams, with the frequency table precomputed on the host (rope_inv_freq and
// rope_cos_sin_scale of kernels/cpu/rope.h) and copied to the device once per model.
struct RopeParams {
  float* x = nullptr;  // [n_tokens, token_stride]; head h of token t at t*token_stride + h*head_dim
  int64_t n_tokens = 0;
  int n_heads = 0;
  int head_dim = 0;
  int rot_dim = 0;  // even, <= head_dim
  int64_t token_stride = 0;
  const int32_t* positions = nullptr;  // [n_tokens]
  const double* inv_freq = nullptr;    // [rot_dim / 2]
  double cos_sin_scale = 1.0;          // YaRN's multiplier, 1 otherwise
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;
};
void rope(const RopeParams& p, cudaStream_t stream);

// out[i] = x[i] * sigmoid(x[i]) and out[i] = silu(gate[i]) * up[i]; out may alias an input.
void silu(const float* x, float* out, int64_t n, cudaStream_t stream);
void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);

// Row-wise softmax(x * scale); an all -inf row gives zeros (as kernels::softmax).
struct SoftmaxParams {
  const float* x = nullptr;  // [rows, x_stride]
  float* y = nullptr;        // [rows, y_stride]; may equal x
  int64_t rows = 0;
  int64_t n = 0;
  int64_t x_stride = 0;
  int64_t y_stride = 0;
  float scale = 1.0f;
};
void softmax(const SoftmaxParams& p, cudaStream_t stream);

// out[k][0..dim) = row ids[k] of the table, dequantized. Ids must already be valid
// (kernels::check_token_ids on the host copy).
struct EmbeddingParams {
  const void* table = nullptr;  // [n_vocab] rows of row_bytes
  DType type = DType::kF32;     // F32, F16, BF16, Q8_0 or Q4_1
  size_t row_bytes = 0;
  int64_t dim = 0;
  const int32_t* ids = nullptr;  // [n]
  int64_t n = 0;
  float* out = nullptr;  // [n, dim]
};
void embedding_lookup(const EmbeddingParams& p, cudaStream_t stream);

}  // namespace deepinfer::cuda
