// Scalar reference (double sum) and dispatch for softmax.
#include "deepinfer/kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace deepinfer::kernels {

void softmax_reference(const float* x, float* y, int64_t n, float scale) {
  if (n <= 0) return;
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i] * scale);
  if (mx == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i) y[i] = 0.0f;
    return;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x[i] * scale - mx);
    y[i] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

void softmax_with_isa(const float* x, float* y, int64_t n, float scale, IsaLevel isa) {
  if (n <= 0) return;
  if (isa >= IsaLevel::kAvx512) return detail::softmax_avx512(x, y, n, scale);
  if (isa >= IsaLevel::kAvx2) return detail::softmax_avx2(x, y, n, scale);
  softmax_reference(x, y, n, scale);
}

void softmax(const float* x, float* y, int64_t n, float scale) {
  softmax_with_isa(x, y, n, scale, best_isa());
}

}  // namespace deepinfer::kernels
