// Shared helpers of the matmul tests: random weights in any type, and error measures.
#pragma once

#include <cstring>
#include <random>
#include <vector>

#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/matmul.h"
#include "deepinfer/tensor/quant.h"

namespace deepinfer::kernels::testing {

inline const DType kAllWeightTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,
                                        DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                                        DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

inline bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

inline bool is_k(DType t) { return t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K; }

// Offsets of the fp16 scales inside a K block (random bytes elsewhere are all valid).
inline std::vector<int> k_f16_fields(DType t) {
  if (t == DType::kQ6_K) return {208};
  return {0, 2};
}

struct Weights {
  std::vector<uint8_t> bytes;
  size_t row_bytes = 0;
};

// A batch-invariant matmul of n_rows rows of x (in_stride floats apart) by w into out
// (out_stride apart).
inline MatmulParams matmul_params(DType t, const Weights& w, int64_t n_in, int64_t n_out, int64_t n_rows,
                                  const float* x, int64_t in_stride, float* out, int64_t out_stride,
                                  MatmulPrecision precision) {
  MatmulParams p;
  p.weight = w.bytes.data();
  p.weight_type = t;
  p.n_out = n_out;
  p.n_in = n_in;
  p.weight_row_bytes = w.row_bytes;
  p.input = x;
  p.n_rows = n_rows;
  p.input_stride = in_stride;
  p.output = out;
  p.output_stride = out_stride;
  p.batch_invariant = true;
  p.precision = precision;
  return p;
}

// n_out rows of n_in values, each row padded by `pad` bytes to exercise weight_row_bytes.
inline Weights random_weights(DType t, int64_t n_out, int64_t n_in, size_t pad, uint32_t seed) {
  std::mt19937 rng(seed);
  Weights w;
  const size_t rb = row_bytes(t, n_in);
  w.row_bytes = rb + pad;
  w.bytes.assign(w.row_bytes * n_out, 0xAB);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> row(n_in);
  for (int64_t o = 0; o < n_out; ++o) {
    uint8_t* dst = w.bytes.data() + o * w.row_bytes;
    if (is_k(t)) {
      for (size_t i = 0; i < rb; ++i) dst[i] = static_cast<uint8_t>(rng());
      const size_t bb = dtype_info(t)->block_bytes;
      for (size_t b = 0; b < rb / bb; ++b)
        for (int off : k_f16_fields(t)) {
          const uint16_t h = f32_to_f16(nd(rng) * 0.02f);
          std::memcpy(dst + b * bb + off, &h, 2);
        }
    } else {
      for (auto& v : row) v = nd(rng);
      if (!quantize_row(t, row.data(), dst, n_in).is_ok()) std::abort();
    }
  }
  return w;
}

inline std::vector<float> random_input(int64_t n_rows, int64_t stride, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(n_rows * stride);
  for (auto& v : x) v = nd(rng);
  return x;
}

// Normalized mean squared error over the [n_rows, n_out] block of two outputs.
inline double nmse(const std::vector<float>& got, const std::vector<float>& want, int64_t n_rows,
                   int64_t n_out, int64_t stride) {
  double num = 0, den = 0;
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      const double g = got[r * stride + o], w = want[r * stride + o];
      num += (g - w) * (g - w);
      den += w * w;
    }
  return den > 0 ? num / den : num;
}

}  // namespace deepinfer::kernels::testing
