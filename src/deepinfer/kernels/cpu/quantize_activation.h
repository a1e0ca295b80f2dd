// Quantization of float activation rows to 8-bit blocks for the integer matmul kernels: one
// absmax scale per 32 elements (paired with Q4_0..Q8_0 weights) or per 256 (K-quant weights).
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::kernels {

// One 32-element activation block. Unlike ggml's Q8_0/Q8_1 the scale stays fp32 and the sum
// stays an exact integer (needed for the weight offsets / mins), so the reference is exact.
struct ActBlock32 {
  float d;       // x ~= d * qs
  float dsum;    // d * sum (for the min term of Q4_1/Q5_1 weights)
  int32_t sum;   // sum of qs
  int32_t pad;
  int8_t qs[32]; // with kUnsigned: stored as qs + 128 (uint8 bits), for VNNI's u8 x s8 dot
};
static_assert(sizeof(ActBlock32) == 48);

enum class ActSign { kSigned, kUnsigned };

// x[0..n) -> n/32 blocks (absmax / 127 scale, round half away from zero). n % 32 == 0.
void quantize_act_q8_32(const float* x, ActBlock32* out, int64_t n, ActSign sign = ActSign::kSigned);
// The same bytes as quantize_act_q8_32, with AVX-512 (call only where the CPU has it).
void quantize_act_q8_32_avx512(const float* x, ActBlock32* out, int64_t n, ActSign sign);
// x[0..n) -> n/256 BlockQ8_K (ggml's Q8_K rounding; bsums per 16). n % 256 == 0.
void quantize_act_q8_k(const float* x, void* out, int64_t n);

}  // namespace deepinfer::kernels
