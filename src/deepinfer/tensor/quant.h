// Scalar conversion between float rows and the GGUF block formats (bit-exact with ggml's
// reference dequantizers and round-to-nearest quantizers). Fast SIMD paths live in kernels/.
#pragma once

#include <cstdint>

#include "deepinfer/base/status.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer {

// True when dequantize_row handles `type`.
bool can_dequantize(DType type);
// True when quantize_row handles `type`.
bool can_quantize(DType type);

// dst[0..n) = the n elements stored in `src` (row of `type`). n must be a multiple of the block.
Status dequantize_row(DType type, const void* src, float* dst, int64_t n);
// Encodes src[0..n) into row_bytes(type, n) bytes at dst. Supports F32, F16, BF16, Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q8_1, Q8_K.
Status quantize_row(DType type, const float* src, void* dst, int64_t n);

namespace quant_detail {
// Per-format entry points (n a multiple of the block size; no checks).
void dequantize_q2_k(const void* src, float* dst, int64_t n);
void dequantize_q3_k(const void* src, float* dst, int64_t n);
void dequantize_q4_k(const void* src, float* dst, int64_t n);
void dequantize_q5_k(const void* src, float* dst, int64_t n);
void dequantize_q6_k(const void* src, float* dst, int64_t n);
void dequantize_q8_k(const void* src, float* dst, int64_t n);
void quantize_q8_k(const float* src, void* dst, int64_t n);
// ggml's nearest_int: round half to even via the 1.5*2^23 trick (|x| < 2^22).
int nearest_int(float x);
}  // namespace quant_detail

}  // namespace deepinfer
