// The cuBLASLt path (blas_matmul.h) against the CPU reference, and whether its fixed algorithm
// really gives a row the same bits whatever the row count. Tolerances (docs/cuda.md): the
// activations are rounded to the weight type, so normalized MSE < 1e-5 for BF16 (expected
// ~1.3e-6) and < 2e-7 for F16 (expected ~2e-8).
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "../matmul/matmul_test_util.h"
#include "deepinfer/kernels/cuda/blas_matmul.h"
#include "gpu_test_util.h"
#include "matmul_gpu_test_util.h"

namespace deepinfer::cuda {
namespace {

using kernels::testing::random_input;
using kernels::testing::random_weights;
using testing::expect_grid_matches_reference;
using testing::MatmulGrid;

class CudaBlasMatmul : public testing::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto b = BlasMatmul::create();
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    blas_.emplace(std::move(*b));
  }

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
    auto act = DeviceBuffer::allocate(BlasMatmul::activation_bytes(p));
    EXPECT_TRUE(act.is_ok());
    const Status st = blas_->run(p, act->data(), stream());
    EXPECT_TRUE(st.is_ok()) << st.message();
    return download<float>(dy, n_rows * n_out);
  }

  std::optional<BlasMatmul> blas_;
};

// The activations are rounded to the weight type, hence a tolerance per type.
double rounded_activations(DType t) { return t == DType::kBF16 ? 1e-5 : 2e-7; }

TEST_F(CudaBlasMatmul, MatchesCpuReference) {
  MatmulGrid g{.types = {DType::kBF16, DType::kF16},
               .n_in = {64, 1024, 4096},
               .n_out = {64, 1000},
               .n_rows = {1, 7, 128, 300},
               .tolerance = rounded_activations};
  expect_grid_matches_reference(
      g, [this](DType t, const kernels::testing::Weights& w, int64_t n_out, int64_t n_in,
                const std::vector<float>& x, int64_t n_rows, int64_t stride) {
        return run(t, w, n_out, n_in, x, n_rows, stride);
      });
}

TEST_F(CudaBlasMatmul, FixedAlgorithmIsBatchInvariant) {
  const int64_t n_in = 4096, n_out = 1024;
  for (DType t : {DType::kBF16, DType::kF16}) {
    const auto w = random_weights(t, n_out, n_in, 0, 9);
    const auto x = random_input(256, n_in, 10);
    const auto all = run(t, w, n_out, n_in, x, 256, n_in);
    for (int64_t rows : {1, 3, 64}) {
      const std::vector<float> head(x.begin(), x.begin() + rows * n_in);
      const auto some = run(t, w, n_out, n_in, head, rows, n_in);
      EXPECT_EQ(std::memcmp(some.data(), all.data(), some.size() * sizeof(float)), 0)
          << dtype_name(t) << ": the first " << rows
          << " rows differ from the same rows in a batch of 256";
    }
  }
}

}  // namespace
}  // namespace deepinfer::cuda
