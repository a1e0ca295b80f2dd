// Numerically stable softmax over one row: y = softmax(x * scale) (scale = 1/temperature).
// Masked entries may be -inf; a row that is all -inf yields all zeros.
#pragma once

#include <cstdint>

#include "deepinfer/base/cpu_features.h"

namespace deepinfer::kernels {

// y may equal x.
void softmax(const float* x, float* y, int64_t n, float scale = 1.0f);
void softmax_reference(const float* x, float* y, int64_t n, float scale = 1.0f);
void softmax_with_isa(const float* x, float* y, int64_t n, float scale, IsaLevel isa);

namespace detail {
void softmax_avx2(const float* x, float* y, int64_t n, float scale);
void softmax_avx512(const float* x, float* y, int64_t n, float scale);
}  // namespace detail

}  // namespace deepinfer::kernels
