// MLP activations on float rows: SiLU, SwiGLU, GELU (tanh approximation), GeGLU. Scalar
// references use std::exp/std::tanh; the AVX2/AVX-512 variants (elementwise_avx*.cc) use a
// polynomial exp; the default entry picks the variant with best_isa().
#pragma once

#include <cstdint>

#include "deepinfer/base/cpu_features.h"

namespace deepinfer::kernels {

// out[i] = x[i] * sigmoid(x[i]); out may alias x.
void silu(const float* x, float* out, int64_t n);
// out[i] = silu(gate[i]) * up[i]; out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);
// out[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); out may alias x.
void gelu(const float* x, float* out, int64_t n);
// out[i] = gelu(gate[i]) * up[i].
void geglu(const float* gate, const float* up, float* out, int64_t n);

void silu_reference(const float* x, float* out, int64_t n);
void swiglu_reference(const float* gate, const float* up, float* out, int64_t n);
void gelu_reference(const float* x, float* out, int64_t n);
void geglu_reference(const float* gate, const float* up, float* out, int64_t n);

void silu_with_isa(const float* x, float* out, int64_t n, IsaLevel isa);
void swiglu_with_isa(const float* gate, const float* up, float* out, int64_t n, IsaLevel isa);
void gelu_with_isa(const float* x, float* out, int64_t n, IsaLevel isa);
void geglu_with_isa(const float* gate, const float* up, float* out, int64_t n, IsaLevel isa);

}  // namespace deepinfer::kernels
