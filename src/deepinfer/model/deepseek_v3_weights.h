// DeepSeek-V3 checkpoint access: tensors by their Hugging Face names with shape checks, linear
// weights (float, bf16, quantized, or FP8 e4m3 with 128x128 block scales) and the small helpers
// (linear, RMSNorm over rows) the MLA, MoE and layer code share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/model.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::model {

// A linear layer's weight [n_out, n_in]. FP8 e4m3 weights carry scale_inv, f32
// [ceil(n_out / 128), ceil(n_in / 128)]: weight block (i, j) is fp8 * scale_inv[i][j].
struct LinearWeight {
  Tensor weight;
  Tensor scale_inv;
  int64_t n_out() const { return weight.shape[0]; }
  int64_t n_in() const { return weight.shape[1]; }
};

// FP8 block edge of DeepSeek's checkpoints (quantization_config.weight_block_size).
inline constexpr int64_t kFp8Block = 128;

class DeepseekWeights {
 public:
  explicit DeepseekWeights(const WeightSource& source) : source_(source) {}

  bool has(const std::string& name) const;
  // The tensor `name` with exactly `shape` (a vector may also be stored [1, n]). Missing or
  // misshapen tensors are errors naming the tensor and the checkpoint.
  Result<Tensor> get(const std::string& name, std::vector<int64_t> shape) const;
  // get() converted to owned f32 (norms, router weights, biases).
  Result<Tensor> get_f32(const std::string& name, std::vector<int64_t> shape) const;
  // `prefix`.weight [n_out, n_in] (and `prefix`.weight_scale_inv for FP8 weights).
  Result<LinearWeight> linear(const std::string& prefix, int64_t n_out, int64_t n_in) const;

 private:
  const WeightSource& source_;
};

// out[r] = W in[r] for `rows` rows (strides in floats).
void linear_forward(const LinearWeight& w, const float* in, int64_t rows, int64_t in_stride, float* out,
                    int64_t out_stride, ForwardContext& ctx);
// A one-thread pool (runs inline, holds no state, safe to share): for kernels called inside a
// parallel region that already spreads work over the real pool's threads. Many small matmuls
// (per attention head, per expert at decode) then cost one pool hand-off instead of one each,
// which matters when the machine is shared and a hand-off can wait for a time slice.
ThreadPool& inline_pool();
// y[r] = rmsnorm(x[r]) * w over `dim` channels; x and y may alias.
void rms_norm_rows(const float* x, int64_t x_stride, const Tensor& w, float* y, int64_t y_stride,
                   int64_t rows, int64_t dim, float eps);
// Owned f32 [n_out, n_in] copy of a linear weight (FP8 blocks scaled), for small matrices that
// are re-laid out at load time (MLA's absorbed kv_b_proj).
Result<std::vector<float>> linear_to_f32(const LinearWeight& w, const std::string& name);

}  // namespace deepinfer::model
