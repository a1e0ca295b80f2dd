// DeepSeek-V4.1 linear weights: FP8 e4m3 with ue8m0 scales per 32x32 block (V4.1-Flash's
// quantization_config.weight_block_size) or plain float types. The shared LinearWeight assumes
// 128x128 FP8 blocks (kFp8Block), so V4.1 carries its block edge here and calls the FP8 kernel,
// which takes the edge as a parameter, itself.
#pragma once

#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4_names.h"
#include "deepinfer/model/layers/linear.h"

namespace deepinfer::model {

struct V41Linear {
  LinearWeight w = {};
  int fp8_block = 0;  // FP8 block edge when w.weight is e4m3
};

// `prefix`.weight [n_out, n_in] (and `prefix`.scale [ceil(n_out / block), ceil(n_in / block)]
// when it is FP8). Errors name the checkpoint and the tensor.
Result<V41Linear> load_v41_linear(const V4Names& names, const std::string& prefix, int64_t n_out,
                                  int64_t n_in, int fp8_block);

// out[r] = W in[r] for `rows` contiguous rows.
void v41_linear_forward(const V41Linear& l, const float* in, int64_t rows, float* out,
                        ForwardContext& ctx);

}  // namespace deepinfer::model
