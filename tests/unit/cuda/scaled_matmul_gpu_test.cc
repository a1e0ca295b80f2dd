// fp8_matmul and fp4_matmul against the CPU scalar references (kernels/cpu/fp8_matmul.cc,
// fp4_matmul.cc) over many shapes, and their batch invariance, bitwise. Tolerance (also in
// docs/cuda.md): normalized MSE < 1e-10 (decoded values are exact; only the fp32 summation
// order differs, and the scale is applied per 32-input chunk instead of per block sum).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "../matmul/matmul_test_util.h"
#include "deepinfer/kernels/cuda/checks.h"
#include "deepinfer/kernels/cuda/matmul.h"
#include "gpu_test_util.h"
#include "scaled_weights_util.h"

namespace deepinfer::cuda {
namespace {

using kernels::testing::nmse;
using kernels::testing::random_input;
using testing::ScaledWeights;

constexpr double kTolerance = 1e-10;

class CudaScaledMatmul : public testing::GpuTest {
 protected:
  std::vector<float> run_fp8(const ScaledWeights& w, int64_t n_out, int64_t n_in,
                             const std::vector<float>& x, int64_t n_rows, int64_t stride) {
    DeviceBuffer dw = upload(w.bytes), ds = upload(w.scale_f32), dx = upload(x),
                 dy = upload(std::vector<float>(n_rows * n_out, 0.0f));
    Fp8MatmulParams p;
    testing::set_matmul_shape(p, w, dw.as<uint8_t>(), n_out, n_in, dx.as<float>(), n_rows, stride, dy.as<float>());
    p.scale_inv = ds.as<float>();
    p.block = w.block;
    const Status st = check_fp8_matmul(p);
    EXPECT_TRUE(st.is_ok()) << st.message();
    fp8_matmul(p, stream());
    return download<float>(dy, n_rows * n_out);
  }

  std::vector<float> run_fp4(const ScaledWeights& w, int64_t n_out, int64_t n_in,
                             const std::vector<float>& x, int64_t n_rows, int64_t stride) {
    DeviceBuffer dw = upload(w.bytes), ds = upload(w.scale_u8), dx = upload(x),
                 dy = upload(std::vector<float>(n_rows * n_out, 0.0f));
    Fp4MatmulParams p;
    testing::set_matmul_shape(p, w, dw.as<uint8_t>(), n_out, n_in, dx.as<float>(), n_rows, stride, dy.as<float>());
    p.scale = ds.as<uint8_t>();
    const Status st = check_fp4_matmul(p);
    EXPECT_TRUE(st.is_ok()) << st.message();
    fp4_matmul(p, stream());
    return download<float>(dy, n_rows * n_out);
  }
};

// Blocks of 128 (V3/V4) and 32 (V4.1); n_in not a multiple of the block or of 32; rows padded
// (16 bytes: the vector loads, 3 bytes: the byte loads) and input rows longer than n_in.
TEST_F(CudaScaledMatmul, Fp8MatchesCpuReference) {
  for (int block : {128, 32})
    for (int64_t n_in : {32, 100, 128, 1000, 7168})
      for (int64_t n_out : {1, 5, 129, 300})
        for (int64_t n_rows : {1, 3, 4, 17})
          for (size_t pad : {size_t{0}, size_t{3}}) {
            const auto w = testing::random_fp8(n_out, n_in, block, pad, uint32_t(n_in + n_out));
            const int64_t stride = n_in + 5;
            const auto x = random_input(n_rows, stride, uint32_t(n_rows));
            const auto want = testing::reference_fp8(w, n_out, n_in, x.data(), n_rows, stride);
            const auto got = run_fp8(w, n_out, n_in, x, n_rows, stride);
            EXPECT_LT(nmse(got, want, n_rows, n_out, n_out), kTolerance)
                << "block " << block << " n_in " << n_in << " n_out " << n_out << " n_rows "
                << n_rows << " pad " << pad;
          }
}

TEST_F(CudaScaledMatmul, Fp4MatchesCpuReference) {
  for (int64_t n_in : {2, 32, 66, 512, 2048, 7168})
    for (int64_t n_out : {1, 7, 64, 257})
      for (int64_t n_rows : {1, 3, 4, 17})
        for (size_t pad : {size_t{0}, size_t{5}}) {
          const auto w = testing::random_fp4(n_out, n_in, pad, uint32_t(n_in * 3 + n_out));
          const int64_t stride = n_in + 3;
          const auto x = random_input(n_rows, stride, uint32_t(n_rows + 1));
          const auto want = testing::reference_fp4(w, n_out, n_in, x.data(), n_rows, stride);
          const auto got = run_fp4(w, n_out, n_in, x, n_rows, stride);
          EXPECT_LT(nmse(got, want, n_rows, n_out, n_out), kTolerance)
              << "n_in " << n_in << " n_out " << n_out << " n_rows " << n_rows << " pad " << pad;
        }
}

// NaN weights (fp8 0x7f) and scales (ue8m0 0xff) reach the output as NaN, as on the CPU.
TEST_F(CudaScaledMatmul, NanCodesPropagate) {
  auto w8 = testing::random_fp8(4, 64, 32, 0, 1);
  w8.bytes[1 * 64 + 10] = 0x7f;
  const auto x = random_input(2, 64, 2);
  const auto y8 = run_fp8(w8, 4, 64, x, 2, 64);
  auto w4 = testing::random_fp4(4, 64, 0, 3);
  w4.scale_u8[2 * w4.scale_stride + 1] = 0xff;
  const auto y4 = run_fp4(w4, 4, 64, x, 2, 64);
  for (int r = 0; r < 2; ++r)
    for (int o = 0; o < 4; ++o) {
      EXPECT_EQ(std::isnan(y8[r * 4 + o]), o == 1) << "fp8 row " << r << " col " << o;
      EXPECT_EQ(std::isnan(y4[r * 4 + o]), o == 2) << "fp4 row " << r << " col " << o;
    }
}

// A row's bits depend on that row alone: alone, in a batch, behind other rows.
TEST_F(CudaScaledMatmul, BatchInvariantBitwise) {
  const int64_t n_in = 7168, n_out = 96, n_rows = 37;
  const auto x = random_input(n_rows, n_in, 6);
  std::vector<float> shifted(3 * n_in, 0.5f);
  shifted.insert(shifted.end(), x.begin(), x.end());
  for (int fmt = 0; fmt < 2; ++fmt) {
    const auto w = fmt == 0 ? testing::random_fp8(n_out, n_in, 128, 0, 5)
                            : testing::random_fp4(n_out, n_in, 0, 5);
    auto run = [&](const std::vector<float>& in, int64_t rows) {
      return fmt == 0 ? run_fp8(w, n_out, n_in, in, rows, n_in)
                      : run_fp4(w, n_out, n_in, in, rows, n_in);
    };
    const auto all = run(x, n_rows);
    for (int64_t r : {int64_t{0}, int64_t{5}, n_rows - 1}) {
      const std::vector<float> one_x(x.begin() + r * n_in, x.begin() + (r + 1) * n_in);
      const auto one = run(one_x, 1);
      EXPECT_EQ(std::memcmp(one.data(), &all[r * n_out], n_out * sizeof(float)), 0)
          << (fmt == 0 ? "fp8" : "fp4") << " row " << r;
    }
    const auto later = run(shifted, n_rows + 3);
    EXPECT_EQ(std::memcmp(&later[3 * n_out], all.data(), all.size() * sizeof(float)), 0)
        << (fmt == 0 ? "fp8" : "fp4");
  }
}

}  // namespace
}  // namespace deepinfer::cuda
