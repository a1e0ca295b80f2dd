// Matmul against FP4 e2m1 weights with ue8m0 scales per 32 inputs (DeepSeek-V4's routed experts,
// the OCP MX layout): output[r][o] = sum_i input[r][i] * e2m1(W[o][i]) * 2^(S[o][i / 32] - 127).
// Weights stay packed in memory, two per byte (low nibble = even input, bit 3 = sign, magnitudes
// {0, .5, 1, 1.5, 2, 3, 4, 6}), and so do the scale bytes; each 32-input block is widened in
// registers and dotted in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "deepinfer/base/cpu_features.h"
#include "deepinfer/base/status.h"
#include "deepinfer/base/thread_pool.h"

namespace deepinfer::kernels {

inline constexpr int kFp4Block = 32;  // inputs per ue8m0 scale

struct Fp4MatmulParams {
  const uint8_t* weight = nullptr;  // [n_out] rows of weight_row_bytes, packed e2m1 pairs
  size_t weight_row_bytes = 0;      // >= n_in / 2
  const uint8_t* scale = nullptr;   // [n_out, scale_stride] ue8m0 bytes (0xff = NaN: refused)
  int64_t scale_stride = 0;         // bytes between scale rows, >= ceil(n_in / 32)
  int64_t n_out = 0;
  int64_t n_in = 0;              // even
  const float* input = nullptr;  // [n_rows, input_stride]
  int64_t n_rows = 0;
  int64_t input_stride = 0;
  float* output = nullptr;  // [n_rows, output_stride]
  int64_t output_stride = 0;
};

// One e2m1 nibble (low 4 bits of v) to float.
float fp4_e2m1_to_float(uint8_t v);
// Float to the nearest e2m1 nibble (ties to the even code; saturating at +-6), for tests and tools.
uint8_t fp4_e2m1_from_float(float f);
// ue8m0 byte to float: 2^(v - 127) (0 is the subnormal 2^-127); NaN for 0xff.
inline float ue8m0_to_float(uint8_t v) {
  if (v == 0xff) return std::numeric_limits<float>::quiet_NaN();
  if (v == 0) return 0x1p-127f;
  const uint32_t bits = uint32_t{v} << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

Status fp4_matmul_check(const Fp4MatmulParams& p);
// Multi-threaded over output rows; the best ISA available (best_isa()).
void fp4_matmul(const Fp4MatmulParams& p, ThreadPool& pool);
void fp4_matmul_with_isa(const Fp4MatmulParams& p, ThreadPool& pool, IsaLevel isa);
// Single-threaded scalar reference.
void fp4_matmul_reference(const Fp4MatmulParams& p);

namespace detail {
// e2m1 code -> twice its value as int8 ({0, 1, 2, 3, 4, 6, 8, 12} and negatives): exact small
// integers the SIMD variants look up with a byte shuffle; the 1/2 folds into the block scale.
extern const int8_t kFp4Doubled[16];
// Output rows [o_begin, o_end) for all input rows.
void fp4_matmul_rows_scalar(const Fp4MatmulParams& p, int64_t o_begin, int64_t o_end);
void fp4_matmul_rows_avx2(const Fp4MatmulParams& p, int64_t o_begin, int64_t o_end);
void fp4_matmul_rows_avx512(const Fp4MatmulParams& p, int64_t o_begin, int64_t o_end);
}  // namespace detail

}  // namespace deepinfer::kernels
