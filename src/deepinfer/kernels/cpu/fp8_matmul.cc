// Scalar reference, conversions and dispatch for the FP8 block-scaled matmul.
#include "deepinfer/kernels/cpu/fp8_matmul.h"

#include <array>
#include <cmath>
#include <limits>

namespace deepinfer::kernels {
namespace {

const std::array<float, 256>& fp8_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) {
      const int exp = (v >> 3) & 0xf, man = v & 7;
      float x;
      if (exp == 0) x = std::ldexp(static_cast<float>(man), -9);  // subnormal: man/8 * 2^-6
      else if (exp == 15 && man == 7) x = std::numeric_limits<float>::quiet_NaN();
      else x = std::ldexp(1.0f + man / 8.0f, exp - 7);
      t[v] = (v & 0x80) ? -x : x;
    }
    return t;
  }();
  return table;
}

}  // namespace

float fp8_e4m3_to_float(uint8_t v) { return fp8_table()[v]; }

uint8_t fp8_e4m3_from_float(float f) {
  // Nearest of the 127 non-negative finite values (ties to even mantissa), by search: only
  // tests and tools call this.
  const auto& t = fp8_table();
  const float a = std::fabs(f);
  int best = 0;
  for (int v = 1; v < 0x7f; ++v) {
    const float d = std::fabs(t[v] - a), db = std::fabs(t[best] - a);
    if (d < db || (d == db && (v & 1) == 0)) best = v;
  }
  return static_cast<uint8_t>(best | (std::signbit(f) ? 0x80 : 0));
}

Status fp8_matmul_check(const Fp8MatmulParams& p) {
  if (!p.weight || !p.scale_inv || !p.input || !p.output) return invalid_argument("fp8_matmul: null pointer");
  if (p.block <= 0 || p.n_out <= 0 || p.n_in <= 0 || p.n_rows < 0)
    return invalid_argument("fp8_matmul: bad sizes (n_out {}, n_in {}, block {})", p.n_out, p.n_in, p.block);
  if (p.weight_row_bytes < static_cast<size_t>(p.n_in) || p.input_stride < p.n_in || p.output_stride < p.n_out ||
      p.scale_stride < (p.n_in + p.block - 1) / p.block)
    return invalid_argument("fp8_matmul: strides too small");
  return Status::ok();
}

namespace detail {

void fp8_matmul_rows_scalar(const Fp8MatmulParams& p, int64_t o_begin, int64_t o_end) {
  const auto& t = fp8_table();
  const int64_t nb = (p.n_in + p.block - 1) / p.block;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* w = p.weight + o * p.weight_row_bytes;
    const float* s = p.scale_inv + (o / p.block) * p.scale_stride;
    for (int64_t r = 0; r < p.n_rows; ++r) {
      const float* x = p.input + r * p.input_stride;
      float total = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t i1 = std::min(p.n_in, (b + 1) * p.block);
        float acc = 0.0f;
        for (int64_t i = b * p.block; i < i1; ++i) acc += x[i] * t[w[i]];
        total += acc * s[b];
      }
      p.output[r * p.output_stride + o] = total;
    }
  }
}

}  // namespace detail

void fp8_matmul_reference(const Fp8MatmulParams& p) { detail::fp8_matmul_rows_scalar(p, 0, p.n_out); }

void fp8_matmul_with_isa(const Fp8MatmulParams& p, ThreadPool& pool, IsaLevel isa) {
  if (p.n_rows == 0) return;
  auto rows = isa >= IsaLevel::kAvx512 ? detail::fp8_matmul_rows_avx512
             : isa >= IsaLevel::kAvx2  ? detail::fp8_matmul_rows_avx2
                                       : detail::fp8_matmul_rows_scalar;
  // Output rows split evenly; grain 16 keeps each thread's weight reads contiguous.
  pool.parallel_for(p.n_out, [&](int64_t b, int64_t e) { rows(p, b, e); }, 16);
}

void fp8_matmul(const Fp8MatmulParams& p, ThreadPool& pool) { fp8_matmul_with_isa(p, pool, best_isa()); }

}  // namespace deepinfer::kernels
