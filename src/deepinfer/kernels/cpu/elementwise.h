// Element-wise kernels on float rows: residual add and the MLP activations (SiLU, SwiGLU, GELU
// tanh approximation, GeGLU). Each has a scalar reference (std::exp/std::tanh) and AVX2/AVX-512
// variants using a polynomial exp; the default entry picks the variant with best_isa().
#pragma once

#include <cstdint>

#include "deepinfer/base/cpu_features.h"

namespace deepinfer::kernels {

// out[i] = a[i] + b[i]; out may alias a or b.
void add(const float* a, const float* b, float* out, int64_t n);
// out[i] = x[i] * sigmoid(x[i]); out may alias x.
void silu(const float* x, float* out, int64_t n);
// out[i] = silu(gate[i]) * up[i]; out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);
// out[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); out may alias x.
void gelu(const float* x, float* out, int64_t n);
// out[i] = gelu(gate[i]) * up[i].
void geglu(const float* gate, const float* up, float* out, int64_t n);

void add_reference(const float* a, const float* b, float* out, int64_t n);
void silu_reference(const float* x, float* out, int64_t n);
void swiglu_reference(const float* gate, const float* up, float* out, int64_t n);
void gelu_reference(const float* x, float* out, int64_t n);
void geglu_reference(const float* gate, const float* up, float* out, int64_t n);

void add_with_isa(const float* a, const float* b, float* out, int64_t n, IsaLevel isa);
void silu_with_isa(const float* x, float* out, int64_t n, IsaLevel isa);
void swiglu_with_isa(const float* gate, const float* up, float* out, int64_t n, IsaLevel isa);
void gelu_with_isa(const float* x, float* out, int64_t n, IsaLevel isa);
void geglu_with_isa(const float* gate, const float* up, float* out, int64_t n, IsaLevel isa);

namespace detail {
// Binary ops share one signature: kind selects add / swiglu / geglu.
enum class BinaryOp { kAdd, kSwiglu, kGeglu };
enum class UnaryOp { kSilu, kGelu };
void binary_avx2(BinaryOp op, const float* a, const float* b, float* out, int64_t n);
void binary_avx512(BinaryOp op, const float* a, const float* b, float* out, int64_t n);
void unary_avx2(UnaryOp op, const float* x, float* out, int64_t n);
void unary_avx512(UnaryOp op, const float* x, float* out, int64_t n);
}  // namespace detail

}  // namespace deepinfer::kernels
