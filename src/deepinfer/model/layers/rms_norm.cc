// RMSNorm wrappers: the kernel call for weighted rows, a scalar loop for the unweighted form.
#include "deepinfer/model/layers/rms_norm.h"

#include <cmath>

#include "deepinfer/kernels/cpu/rms_norm.h"

namespace deepinfer::model {

void rms_norm_rows(const float* x, int64_t x_stride, const Tensor& w, float* y, int64_t y_stride,
                   int64_t rows, int64_t dim, float eps) {
  kernels::RmsNormParams p;
  p.x = x;
  p.w = static_cast<const float*>(w.data);
  p.y = y;
  p.rows = rows;
  p.dim = dim;
  p.x_stride = x_stride;
  p.y_stride = y_stride;
  p.eps = eps;
  kernels::rms_norm(p);
}

void rms_norm_unweighted(float* x, int64_t n_vectors, int64_t dim, float eps) {
  for (int64_t v = 0; v < n_vectors; ++v) {
    float* y = x + v * dim;
    double ss = 0;
    for (int64_t c = 0; c < dim; ++c) ss += double(y[c]) * y[c];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / double(dim) + eps));
    for (int64_t c = 0; c < dim; ++c) y[c] *= inv;
  }
}

}  // namespace deepinfer::model
