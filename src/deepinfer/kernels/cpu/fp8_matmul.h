// Matmul against FP8 e4m3 weights with block scales (DeepSeek-V3's checkpoint format:
// weight_scale_inv per 128x128 block): output[r][o] = sum_i input[r][i] * fp8(W[o][i]) *
// scale_inv[o / block][i / block]. Weights stay FP8 in memory; each block is widened in
// registers, dotted in f32, and its sum scaled once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deepinfer/base/cpu_features.h"
#include "deepinfer/base/status.h"
#include "deepinfer/base/thread_pool.h"

namespace deepinfer::kernels {

struct Fp8MatmulParams {
  const uint8_t* weight = nullptr;  // [n_out] rows of weight_row_bytes, e4m3fn bytes
  size_t weight_row_bytes = 0;      // >= n_in
  const float* scale_inv = nullptr; // [ceil(n_out / block), scale_stride]
  int64_t scale_stride = 0;         // floats between scale rows, >= ceil(n_in / block)
  int block = 128;                  // block edge in both directions
  int64_t n_out = 0;
  int64_t n_in = 0;
  const float* input = nullptr;     // [n_rows, input_stride]
  int64_t n_rows = 0;
  int64_t input_stride = 0;
  float* output = nullptr;          // [n_rows, output_stride]
  int64_t output_stride = 0;
};

// e4m3fn byte to float (0x7f / 0xff are NaN; no infinities).
float fp8_e4m3_to_float(uint8_t v);
// Float to the nearest e4m3fn byte (saturating at +-448), for tests and tools.
uint8_t fp8_e4m3_from_float(float f);

Status fp8_matmul_check(const Fp8MatmulParams& p);
// Multi-threaded over output rows; the best ISA available (best_isa()).
void fp8_matmul(const Fp8MatmulParams& p, ThreadPool& pool);
void fp8_matmul_with_isa(const Fp8MatmulParams& p, ThreadPool& pool, IsaLevel isa);
// Single-threaded scalar reference.
void fp8_matmul_reference(const Fp8MatmulParams& p);

namespace detail {
// Output rows [o_begin, o_end) for all input rows.
void fp8_matmul_rows_scalar(const Fp8MatmulParams& p, int64_t o_begin, int64_t o_end);
void fp8_matmul_rows_avx2(const Fp8MatmulParams& p, int64_t o_begin, int64_t o_end);
void fp8_matmul_rows_avx512(const Fp8MatmulParams& p, int64_t o_begin, int64_t o_end);
}  // namespace detail

}  // namespace deepinfer::kernels
