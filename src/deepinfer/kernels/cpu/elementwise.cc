// Scalar references and run-time dispatch for the element-wise kernels.
#include "deepinfer/kernels/cpu/elementwise.h"

#include <cmath>

namespace deepinfer::kernels {
namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)

float silu1(float x) { return static_cast<float>(x / (1.0 + std::exp(-static_cast<double>(x)))); }
float gelu1(float x) {
  const double xd = x;
  return static_cast<float>(0.5 * xd * (1.0 + std::tanh(kGeluC * (xd + 0.044715 * xd * xd * xd))));
}

using detail::BinaryOp;
using detail::UnaryOp;

void binary(BinaryOp op, const float* a, const float* b, float* out, int64_t n, IsaLevel isa) {
  if (isa >= IsaLevel::kAvx512) return detail::binary_avx512(op, a, b, out, n);
  if (isa >= IsaLevel::kAvx2) return detail::binary_avx2(op, a, b, out, n);
  switch (op) {
    case BinaryOp::kAdd: return add_reference(a, b, out, n);
    case BinaryOp::kSwiglu: return swiglu_reference(a, b, out, n);
    case BinaryOp::kGeglu: return geglu_reference(a, b, out, n);
  }
}

void unary(UnaryOp op, const float* x, float* out, int64_t n, IsaLevel isa) {
  if (isa >= IsaLevel::kAvx512) return detail::unary_avx512(op, x, out, n);
  if (isa >= IsaLevel::kAvx2) return detail::unary_avx2(op, x, out, n);
  if (op == UnaryOp::kSilu) return silu_reference(x, out, n);
  return gelu_reference(x, out, n);
}

}  // namespace

void add_reference(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
void silu_reference(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu1(x[i]);
}
void swiglu_reference(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu1(gate[i]) * up[i];
}
void gelu_reference(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu1(x[i]);
}
void geglu_reference(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu1(gate[i]) * up[i];
}

void add_with_isa(const float* a, const float* b, float* out, int64_t n, IsaLevel isa) {
  binary(BinaryOp::kAdd, a, b, out, n, isa);
}
void swiglu_with_isa(const float* gate, const float* up, float* out, int64_t n, IsaLevel isa) {
  binary(BinaryOp::kSwiglu, gate, up, out, n, isa);
}
void geglu_with_isa(const float* gate, const float* up, float* out, int64_t n, IsaLevel isa) {
  binary(BinaryOp::kGeglu, gate, up, out, n, isa);
}
void silu_with_isa(const float* x, float* out, int64_t n, IsaLevel isa) {
  unary(UnaryOp::kSilu, x, out, n, isa);
}
void gelu_with_isa(const float* x, float* out, int64_t n, IsaLevel isa) {
  unary(UnaryOp::kGelu, x, out, n, isa);
}

void add(const float* a, const float* b, float* out, int64_t n) { add_with_isa(a, b, out, n, best_isa()); }
void silu(const float* x, float* out, int64_t n) { silu_with_isa(x, out, n, best_isa()); }
void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  swiglu_with_isa(gate, up, out, n, best_isa());
}
void gelu(const float* x, float* out, int64_t n) { gelu_with_isa(x, out, n, best_isa()); }
void geglu(const float* gate, const float* up, float* out, int64_t n) {
  geglu_with_isa(gate, up, out, n, best_isa());
}

}  // namespace deepinfer::kernels
