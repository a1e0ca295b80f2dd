// Scalar reference, conversions and dispatch for the FP4 e2m1 matmul with ue8m0 block scales.
#include "deepinfer/kernels/cpu/fp4_matmul.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::kernels {
namespace detail {

const int8_t kFp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace detail

float fp4_e2m1_to_float(uint8_t v) { return 0.5f * detail::kFp4Doubled[v & 0xf]; }

uint8_t fp4_e2m1_from_float(float f) {
  const float a = std::min(std::fabs(f), 6.0f);
  int best = 0;
  for (int v = 1; v < 8; ++v) {
    const float d = std::fabs(fp4_e2m1_to_float(static_cast<uint8_t>(v)) - a);
    const float db = std::fabs(fp4_e2m1_to_float(static_cast<uint8_t>(best)) - a);
    if (d < db || (d == db && (v & 1) == 0)) best = v;
  }
  return static_cast<uint8_t>(best | (std::signbit(f) && best != 0 ? 8 : 0));
}

Status fp4_matmul_check(const Fp4MatmulParams& p) {
  if (!p.weight || !p.scale || !p.input || !p.output)
    return invalid_argument("fp4_matmul: null pointer");
  if (p.n_out <= 0 || p.n_in <= 0 || p.n_in % 2 != 0 || p.n_rows < 0)
    return invalid_argument("fp4_matmul: bad sizes (n_out {}, n_in {}; n_in must be even)", p.n_out,
                            p.n_in);
  if (p.weight_row_bytes < static_cast<size_t>(p.n_in / 2) || p.input_stride < p.n_in ||
      p.output_stride < p.n_out || p.scale_stride < (p.n_in + kFp4Block - 1) / kFp4Block)
    return invalid_argument("fp4_matmul: strides too small");
  return Status::ok();
}

namespace detail {

void fp4_matmul_rows_scalar(const Fp4MatmulParams& p, int64_t o_begin, int64_t o_end) {
  const int64_t nb = (p.n_in + kFp4Block - 1) / kFp4Block;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* w = p.weight + o * p.weight_row_bytes;
    const uint8_t* s = p.scale + o * p.scale_stride;
    for (int64_t r = 0; r < p.n_rows; ++r) {
      const float* x = p.input + r * p.input_stride;
      float total = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t i1 = std::min(p.n_in, (b + 1) * kFp4Block);
        float acc = 0.0f;
        for (int64_t i = b * kFp4Block; i < i1; i += 2) {
          const uint8_t byte = w[i / 2];
          acc += x[i] * fp4_e2m1_to_float(byte & 0xf) + x[i + 1] * fp4_e2m1_to_float(byte >> 4);
        }
        total += acc * ue8m0_to_float(s[b]);
      }
      p.output[r * p.output_stride + o] = total;
    }
  }
}

}  // namespace detail

void fp4_matmul_reference(const Fp4MatmulParams& p) {
  detail::fp4_matmul_rows_scalar(p, 0, p.n_out);
}

void fp4_matmul_with_isa(const Fp4MatmulParams& p, ThreadPool& pool, IsaLevel isa) {
  if (p.n_rows == 0) return;
  auto rows = isa >= IsaLevel::kAvx512 ? detail::fp4_matmul_rows_avx512
              : isa >= IsaLevel::kAvx2 ? detail::fp4_matmul_rows_avx2
                                       : detail::fp4_matmul_rows_scalar;
  // Output rows split evenly; grain 16 keeps each thread's weight reads contiguous.
  pool.parallel_for(
      p.n_out, [&](int64_t b, int64_t e) { rows(p, b, e); }, 16);
}

void fp4_matmul(const Fp4MatmulParams& p, ThreadPool& pool) {
  fp4_matmul_with_isa(p, pool, best_isa());
}

}  // namespace deepinfer::kernels
