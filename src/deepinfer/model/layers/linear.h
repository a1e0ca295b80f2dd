// Linear layers over every weight type the kernels take: f32, f16, bf16, the GGUF quantized
// types (kernels::matmul) and FP8 e4m3 with square block scales (kernels::fp8_matmul), with an
// optional f32 bias. One call site per projection in every architecture.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/model.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::model {

// FP8 block edge of DeepSeek's checkpoints (quantization_config.weight_block_size).
inline constexpr int64_t kFp8Block = 128;

// A linear layer's weight [n_out, n_in]. FP8 e4m3 weights carry scale_inv, f32
// [ceil(n_out / fp8_block), ceil(n_in / fp8_block)]: weight block (i, j) is fp8 *
// scale_inv[i][j] (128x128 in DeepSeek-V3/V4, 32x32 in V4.1). `bias`, when not empty, is f32
// [n_out] and is added after the product.
struct LinearWeight {
  Tensor weight;
  Tensor scale_inv;
  Tensor bias;
  int fp8_block = static_cast<int>(kFp8Block);
  int64_t n_out() const { return weight.shape[0]; }
  int64_t n_in() const { return weight.shape[1]; }
};

// out[r] = W in[r] (+ bias) for `rows` rows (strides in floats). Quantized weights use
// ctx.int8_activations' precision; ctx.batch_invariant keeps f32 weights off BLAS.
void linear_forward(const LinearWeight& w, const float* in, int64_t rows, int64_t in_stride, float* out,
                    int64_t out_stride, ForwardContext& ctx);

// One projection of linear_forward_shared: its weight and where its rows go.
struct LinearTarget {
  const LinearWeight* weight = nullptr;
  float* out = nullptr;
  int64_t out_stride = 0;
};

// linear_forward of every target over the same input (q, k and v; gate and up), bitwise the same
// outputs, in one hand-off to the thread pool where the weights allow it (kernels::matmul_group;
// FP8 weights go one by one). At most kernels::kMaxMatmulGroup targets.
void linear_forward_shared(std::span<const LinearTarget> targets, const float* in, int64_t rows, int64_t in_stride,
                           ForwardContext& ctx);

// out[r] = W in[r] for a plain f32 row-major W [n_out, n_in] held outside a Tensor (matrices
// re-laid out at load time, e.g. MLA's absorbed per-head kv_b_proj parts).
void linear_f32(const float* w, int64_t n_out, int64_t n_in, const float* in, int64_t rows, int64_t in_stride,
                float* out, int64_t out_stride, ForwardContext& ctx);

// Owned f32 [n_out, n_in] copy of a linear weight (FP8 blocks scaled), for small matrices that
// are re-laid out at load time (MLA's absorbed kv_b_proj).
Result<std::vector<float>> linear_to_f32(const LinearWeight& w, const std::string& name);

// A one-thread pool (runs inline, holds no state, safe to share): for kernels called inside a
// parallel region that already spreads work over the real pool's threads. Many small matmuls
// (per attention head, per expert at decode) then cost one pool hand-off instead of one each,
// which matters when the machine is shared and a hand-off can wait for a time slice.
ThreadPool& inline_pool();

}  // namespace deepinfer::model
