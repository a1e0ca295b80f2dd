// Scalar reference (double accumulation) and dispatch for RMSNorm.
#include "deepinfer/kernels/cpu/rms_norm.h"

#include <cmath>

namespace deepinfer::kernels {

void rms_norm_reference(const RmsNormParams& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + r * p.x_stride;
    float* y = p.y + r * p.y_stride;
    double ss = 0;
    for (int64_t i = 0; i < p.dim; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(p.dim) + p.eps));
    for (int64_t i = 0; i < p.dim; ++i) y[i] = x[i] * inv * (p.w ? p.w[i] : 1.0f);
  }
}

void rms_norm_with_isa(const RmsNormParams& p, IsaLevel isa) {
  if (p.rows <= 0 || p.dim <= 0) return;
  if (isa >= IsaLevel::kAvx512) return detail::rms_norm_avx512(p);
  if (isa >= IsaLevel::kAvx2) return detail::rms_norm_avx2(p);
  rms_norm_reference(p);
}

void rms_norm(const RmsNormParams& p) { rms_norm_with_isa(p, best_isa()); }

}  // namespace deepinfer::kernels
