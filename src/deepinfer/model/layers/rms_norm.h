// RMSNorm over rows: the weighted form every pre-norm block uses (kernels::rms_norm) and the
// unweighted one DeepSeek-V4 applies per query head.
#pragma once

#include <cstdint>

#include "deepinfer/tensor/tensor.h"

namespace deepinfer::model {

// y[r] = rmsnorm(x[r]) * w over `dim` channels (w: f32 [dim]); strides in floats; x and y may
// alias.
void rms_norm_rows(const float* x, int64_t x_stride, const Tensor& w, float* y, int64_t y_stride,
                   int64_t rows, int64_t dim, float eps);

// In place, no weight: each of n_vectors contiguous vectors of `dim` floats scaled by
// 1 / sqrt(mean(x^2) + eps), the sum accumulated in double (DeepSeek-V4's q normalisation).
void rms_norm_unweighted(float* x, int64_t n_vectors, int64_t dim, float eps);

}  // namespace deepinfer::model
