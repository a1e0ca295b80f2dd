// Element-wise kernels on float rows: the residual add here, the MLP activations in
// activation.h (same implementation files), and the per-ISA entry points both share.
#pragma once

#include <cstdint>

#include "deepinfer/base/cpu_features.h"
#include "deepinfer/kernels/cpu/activation.h"

namespace deepinfer::kernels {

// out[i] = a[i] + b[i]; out may alias a or b.
void add(const float* a, const float* b, float* out, int64_t n);

void add_reference(const float* a, const float* b, float* out, int64_t n);

void add_with_isa(const float* a, const float* b, float* out, int64_t n, IsaLevel isa);

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
