// warp_matmul against the CPU scalar reference (kHigh: fp32 activations, weights dequantized
// to fp32) for every weight type it handles, and its batch invariance, bitwise. Tolerance (also
// in docs/cuda.md): normalized MSE < 1e-10 (only the fp32 summation order differs).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "../matmul/matmul_test_util.h"
#include "deepinfer/kernels/cuda/checks.h"
#include "deepinfer/kernels/cuda/matmul.h"
#include "gpu_test_util.h"
#include "matmul_gpu_test_util.h"

namespace deepinfer::cuda {
namespace {

using kernels::testing::random_input;
using kernels::testing::random_weights;
using testing::expect_grid_matches_reference;
using testing::MatmulGrid;
using testing::MatmulRun;

constexpr DType kTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_1};

class CudaMatmul : public testing::GpuTest {
 protected:
  // Runs warp_matmul on rows [0, n_rows) of `x` and returns [n_rows, n_out].
  std::vector<float> run(DType t, const kernels::testing::Weights& w, int64_t n_out, int64_t n_in,
                         const std::vector<float>& x, int64_t n_rows, int64_t stride) {
    DeviceBuffer dw = upload(w.bytes), dx = upload(x),
                 dy = upload(std::vector<float>(n_rows * n_out, 0.0f));
    MatmulParams p;
    p.weight = dw.data();
    p.weight_type = t;
    p.n_out = n_out;
    p.n_in = n_in;
    p.weight_row_bytes = w.row_bytes;
    p.input = dx.as<float>();
    p.n_rows = n_rows;
    p.input_stride = stride;
    p.output = dy.as<float>();
    p.output_stride = n_out;
    const Status st = check_matmul(p);
    EXPECT_TRUE(st.is_ok()) << st.message();
    warp_matmul(p, stream());
    return download<float>(dy, n_rows * n_out);
  }
  // run() as the grid sweep takes it.
  MatmulRun runner() {
    return [this](DType t, const kernels::testing::Weights& w, int64_t n_out, int64_t n_in,
                  const std::vector<float>& x, int64_t n_rows, int64_t stride) {
      return run(t, w, n_out, n_in, x, n_rows, stride);
    };
  }
};

double only_summation_order(DType) { return 1e-10; }

// Rows padded (F32 by 8 bytes, the others by 4) so weight_row_bytes is honored, and input rows
// longer than n_in.
TEST_F(CudaMatmul, MatchesCpuReference) {
  MatmulGrid g{.types = {std::begin(kTypes), std::end(kTypes)},
               .n_in = {32, 96, 1024, 4096},
               .n_out = {1, 5, 64, 257},
               .n_rows = {1, 3, 4, 17},
               .stride_extra = 5,
               .row_pad = [](DType t) -> size_t { return t == DType::kF32 ? 8 : 4; },
               .tolerance = only_summation_order};
  expect_grid_matches_reference(g, runner());
}

TEST_F(CudaMatmul, FloatWeightsTakeAnyLength) {
  MatmulGrid g{.types = {DType::kF32, DType::kF16, DType::kBF16},
               .n_in = {1, 33, 100},
               .n_out = {9},
               .n_rows = {2},
               .row_pad = [](DType) -> size_t { return 4; },
               .tolerance = only_summation_order};
  expect_grid_matches_reference(g, runner());
}

// A row's bits must not depend on how many rows share the launch or where the row sits.
TEST_F(CudaMatmul, BatchInvariantBitwise) {
  const int64_t n_in = 2048, n_out = 96, n_rows = 37;
  for (DType t : kTypes) {
    const auto w = random_weights(t, n_out, n_in, 0, 5);
    const auto x = random_input(n_rows, n_in, 6);
    const auto all = run(t, w, n_out, n_in, x, n_rows, n_in);
    for (int64_t r : {int64_t{0}, int64_t{5}, n_rows - 1}) {
      const std::vector<float> one_x(x.begin() + r * n_in, x.begin() + (r + 1) * n_in);
      const auto one = run(t, w, n_out, n_in, one_x, 1, n_in);
      EXPECT_EQ(std::memcmp(one.data(), &all[r * n_out], n_out * sizeof(float)), 0)
          << dtype_name(t) << " row " << r;
    }
    // The same rows again, behind 3 other rows (a different tile slot for each).
    std::vector<float> shifted(3 * n_in, 0.5f);
    shifted.insert(shifted.end(), x.begin(), x.end());
    const auto later = run(t, w, n_out, n_in, shifted, n_rows + 3, n_in);
    EXPECT_EQ(std::memcmp(&later[3 * n_out], all.data(), all.size() * sizeof(float)), 0)
        << dtype_name(t);
  }
}

}  // namespace
}  // namespace deepinfer::cuda
