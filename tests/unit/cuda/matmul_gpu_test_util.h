// The shape sweep the GPU matmul tests share: every weight type x n_in x n_out x n_rows of a
// grid, random weights and input, the GPU path against the CPU scalar reference by normalized
// MSE, the parameters printed on failure.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "../matmul/matmul_test_util.h"
#include "deepinfer/kernels/cpu/matmul.h"

namespace deepinfer::cuda::testing {

struct MatmulGrid {
  std::vector<DType> types;
  std::vector<int64_t> n_in, n_out, n_rows;
  int64_t stride_extra = 0;          // input row stride = n_in + stride_extra
  size_t (*row_pad)(DType) = nullptr;  // bytes after each weight row (none when null)
  double (*tolerance)(DType) = nullptr;
};

// The GPU path under test: rows [0, n_rows) of `x` (row stride `stride`) -> [n_rows, n_out].
using MatmulRun = std::function<std::vector<float>(DType t, const kernels::testing::Weights& w,
                                                   int64_t n_out, int64_t n_in,
                                                   const std::vector<float>& x, int64_t n_rows,
                                                   int64_t stride)>;

// The CPU scalar reference of the same product.
inline std::vector<float> reference_matmul(DType t, const kernels::testing::Weights& w, int64_t n_out,
                                           int64_t n_in, const std::vector<float>& x,
                                           int64_t n_rows, int64_t stride) {
  std::vector<float> out(n_rows * n_out, 0.0f);
  kernels::MatmulParams p;
  p.weight = w.bytes.data();
  p.weight_type = t;
  p.n_out = n_out;
  p.n_in = n_in;
  p.weight_row_bytes = w.row_bytes;
  p.input = x.data();
  p.n_rows = n_rows;
  p.input_stride = stride;
  p.output = out.data();
  p.output_stride = n_out;
  kernels::matmul_reference(p);
  return out;
}

inline void expect_grid_matches_reference(const MatmulGrid& g, const MatmulRun& run) {
  for (DType t : g.types)
    for (int64_t n_in : g.n_in)
      for (int64_t n_out : g.n_out)
        for (int64_t n_rows : g.n_rows) {
          const size_t pad = g.row_pad ? g.row_pad(t) : 0;
          const auto w = kernels::testing::random_weights(t, n_out, n_in, pad,
                                                          uint32_t(n_in * 7 + n_out));
          const int64_t stride = n_in + g.stride_extra;
          const auto x = kernels::testing::random_input(n_rows, stride, uint32_t(n_rows));
          const auto want = reference_matmul(t, w, n_out, n_in, x, n_rows, stride);
          const auto got = run(t, w, n_out, n_in, x, n_rows, stride);
          EXPECT_LT(kernels::testing::nmse(got, want, n_rows, n_out, n_out), g.tolerance(t))
              << dtype_name(t) << " n_in " << n_in << " n_out " << n_out << " n_rows " << n_rows
              << " stride " << stride << " row pad " << pad;
        }
}

}  // namespace deepinfer::cuda::testing
