// Random FP8 (e4m3, float scale_inv per block x block) and FP4 (e2m1 pairs, ue8m0 per 32)
// weights in the CPU kernels' layouts, and their CPU scalar reference products, for the GPU
// matmul tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "deepinfer/kernels/cpu/fp4_matmul.h"
#include "deepinfer/kernels/cpu/fp8_matmul.h"

namespace deepinfer::cuda::testing {

struct ScaledWeights {
  std::vector<uint8_t> bytes;  // [n_out, row_bytes]
  size_t row_bytes = 0;
  std::vector<float> scale_f32;   // FP8: [ceil(n_out / block), scale_stride]
  std::vector<uint8_t> scale_u8;  // FP4: [n_out, scale_stride]
  int64_t scale_stride = 0;
  int block = 128;
};

// Every byte but the two NaNs (0x7f, 0xff); scales around 1 / 64 as DeepSeek's. Rows padded
// by `pad` bytes, scale rows by one spare entry.
inline ScaledWeights random_fp8(int64_t n_out, int64_t n_in, int block, size_t pad, uint32_t seed) {
  std::mt19937 rng(seed);
  ScaledWeights w;
  w.block = block;
  w.row_bytes = n_in + pad;
  w.bytes.resize(w.row_bytes * n_out);
  for (auto& b : w.bytes) {
    b = static_cast<uint8_t>(rng());
    if ((b & 0x7f) == 0x7f) b ^= 1;
  }
  w.scale_stride = (n_in + block - 1) / block + 1;
  w.scale_f32.resize(((n_out + block - 1) / block) * w.scale_stride);
  std::uniform_real_distribution<float> sd(0.5f / 64, 2.0f / 64);
  for (auto& s : w.scale_f32) s = sd(rng);
  return w;
}

// Every nibble is a value; ue8m0 exponents 2^-6 .. 2^2 (never the NaN 0xff).
inline ScaledWeights random_fp4(int64_t n_out, int64_t n_in, size_t pad, uint32_t seed) {
  std::mt19937 rng(seed);
  ScaledWeights w;
  w.row_bytes = n_in / 2 + pad;
  w.bytes.resize(w.row_bytes * n_out);
  for (auto& b : w.bytes) b = static_cast<uint8_t>(rng());
  w.scale_stride = (n_in + 31) / 32 + 2;
  w.scale_u8.resize(n_out * w.scale_stride);
  for (auto& s : w.scale_u8) s = static_cast<uint8_t>(121 + rng() % 9);
  return w;
}

// The fields every FP8/FP4 matmul params struct shares (CPU kernels:: and cuda:: alike):
// weight bytes and row size, scale stride, shape, input and output rows. The caller sets the
// scales (and FP8's block).
template <typename Params>
void set_matmul_shape(Params& p, const ScaledWeights& w, const uint8_t* weight, int64_t n_out, int64_t n_in,
                      const float* x, int64_t n_rows, int64_t stride, float* out) {
  p.weight = weight;
  p.weight_row_bytes = w.row_bytes;
  p.scale_stride = w.scale_stride;
  p.n_out = n_out;
  p.n_in = n_in;
  p.input = x;
  p.n_rows = n_rows;
  p.input_stride = stride;
  p.output = out;
  p.output_stride = n_out;
}

// CPU scalar reference: rows [0, n_rows) of x (row stride `stride`) -> [n_rows, n_out].
inline std::vector<float> reference_fp8(const ScaledWeights& w, int64_t n_out, int64_t n_in,
                                        const float* x, int64_t n_rows, int64_t stride) {
  std::vector<float> out(n_rows * n_out);
  kernels::Fp8MatmulParams p;
  set_matmul_shape(p, w, w.bytes.data(), n_out, n_in, x, n_rows, stride, out.data());
  p.scale_inv = w.scale_f32.data();
  p.block = w.block;
  kernels::fp8_matmul_reference(p);
  return out;
}

inline std::vector<float> reference_fp4(const ScaledWeights& w, int64_t n_out, int64_t n_in,
                                        const float* x, int64_t n_rows, int64_t stride) {
  std::vector<float> out(n_rows * n_out);
  kernels::Fp4MatmulParams p;
  set_matmul_shape(p, w, w.bytes.data(), n_out, n_in, x, n_rows, stride, out.data());
  p.scale = w.scale_u8.data();
  kernels::fp4_matmul_reference(p);
  return out;
}

}  // namespace deepinfer::cuda::testing
