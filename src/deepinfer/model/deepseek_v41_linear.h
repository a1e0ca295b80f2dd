// DeepSeek-V4.1 linear weights: FP8 e4m3 with ue8m0 scales per 32x32 block (V4.1-Flash's
// quantization_config.weight_block_size; LinearWeight::fp8_block) or plain float types.
#pragma once

#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4_names.h"
#include "deepinfer/model/layers/linear.h"

namespace deepinfer::model {

// `prefix`.weight [n_out, n_in] (and `prefix`.scale [ceil(n_out / block), ceil(n_in / block)]
// when it is FP8, whose block edge is then `fp8_block`). Errors name the checkpoint and the
// tensor.
Result<LinearWeight> load_v41_linear(const V4Names& names, const std::string& prefix, int64_t n_out,
                                     int64_t n_in, int fp8_block);

}  // namespace deepinfer::model
