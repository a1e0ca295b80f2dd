// RMSNorm over rows: y = x / sqrt(mean(x^2) + eps) * w. Each row is reduced in a fixed order
// that depends only on dim and the ISA, so a row's result never depends on the batch around it.
#pragma once

#include <cstdint>

#include "deepinfer/base/cpu_features.h"

namespace deepinfer::kernels {

struct RmsNormParams {
  const float* x;      // [rows, x_stride]
  const float* w;      // [dim]; nullptr = no weight (unit scale)
  float* y;            // [rows, y_stride]; may equal x (in place)
  int64_t rows;
  int64_t dim;
  int64_t x_stride;    // floats between rows of x
  int64_t y_stride;    // floats between rows of y
  float eps;
};

void rms_norm(const RmsNormParams& p);
void rms_norm_reference(const RmsNormParams& p);
void rms_norm_with_isa(const RmsNormParams& p, IsaLevel isa);

namespace detail {
void rms_norm_avx2(const RmsNormParams& p);
void rms_norm_avx512(const RmsNormParams& p);
}  // namespace detail

}  // namespace deepinfer::kernels
