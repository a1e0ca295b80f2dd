// DeepSeek-V3 checkpoint access: tensors by their Hugging Face names with shape checks, and linear
// weights (float, bf16, quantized, or FP8 e4m3 with 128x128 block scales). The linear and RMSNorm
// layers themselves are the shared ones in layers/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/layers/linear.h"
#include "deepinfer/model/layers/rms_norm.h"
#include "deepinfer/model/model.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::model {

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

}  // namespace deepinfer::model
