// The warp_matmul kernel source (warp_matmul_kernel.cuh) compiled as host code and run with
// fibers (device_emulation.h): FP8 / FP4 decoding and scales, the grouped launch's offsets,
// gather rows and row slices, against the CPU scalar references, here without a GPU. fmaf is
// exact on both sides and the butterfly's order is the device's, so these are the bits the GPU
// should produce; the GPU tests check the real thing.
#include "device_emulation.h"
// (the shim first)
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "../matmul/matmul_test_util.h"
#include "deepinfer/kernels/cuda/warp_matmul_kernel.cuh"
#include "matmul_gpu_test_util.h"
#include "scaled_weights_util.h"

namespace deepinfer::cuda {
namespace {

using detail::warp::Args;
using detail::warp::Kind;
using kernels::testing::nmse;
using kernels::testing::random_input;

void run_kernel(Kind k, const Args& a, unsigned n_groups, unsigned slices) {
  using namespace detail::warp;
  const EmulatedDim grid{static_cast<unsigned>((a.n_out + kWarps - 1) / kWarps), n_groups, slices};
  const std::function<void()> body = [&] {
    switch (k) {
      case Kind::kF32:
        warp_matmul_kernel<Kind::kF32>(a);
        break;
      case Kind::kF16:
        warp_matmul_kernel<Kind::kF16>(a);
        break;
      case Kind::kBF16:
        warp_matmul_kernel<Kind::kBF16>(a);
        break;
      case Kind::kQ8_0:
        warp_matmul_kernel<Kind::kQ8_0>(a);
        break;
      case Kind::kQ4_1:
        warp_matmul_kernel<Kind::kQ4_1>(a);
        break;
      case Kind::kFp8Block:
        warp_matmul_kernel<Kind::kFp8Block>(a);
        break;
      case Kind::kFp4:
        warp_matmul_kernel<Kind::kFp4>(a);
        break;
    }
  };
  emulation::launch(grid, kWarps * 32, body);
}

// One weight (plain launch) of either scaled format: [n_rows, n_out].
std::vector<float> run_plain(Kind k, const testing::ScaledWeights& w, int64_t n_out, int64_t n_in,
                             const std::vector<float>& x, int64_t n_rows, int64_t stride) {
  std::vector<float> y(n_rows * n_out, -1.0f);
  Args a;
  a.weight = w.bytes.data();
  a.scale = k == Kind::kFp8Block ? static_cast<const void*>(w.scale_f32.data()) : w.scale_u8.data();
  a.weight_row_bytes = w.row_bytes;
  a.scale_stride = w.scale_stride;
  a.block = w.block;
  a.n_out = n_out;
  a.n_in = n_in;
  a.n_rows = n_rows;
  a.input = x.data();
  a.input_stride = stride;
  a.output = y.data();
  a.output_stride = n_out;
  run_kernel(k, a, 1, static_cast<unsigned>((n_rows + 3) / 4));
  return y;
}

TEST(CudaWarpMatmulEmulated, Fp8AndFp4MatchCpuReference) {
  for (int64_t n_in : {32, 100, 256, 300})
    for (int64_t n_out : {1, 6})
      for (int64_t n_rows : {1, 5})
        for (size_t pad : {size_t{0}, size_t{3}}) {
          const int64_t stride = n_in + 5;
          const auto x = random_input(n_rows, stride, uint32_t(n_rows + n_in));
          for (int block : {128, 32}) {
            const auto w = testing::random_fp8(n_out, n_in, block, pad, uint32_t(n_in + n_out));
            const auto want = testing::reference_fp8(w, n_out, n_in, x.data(), n_rows, stride);
            const auto got = run_plain(Kind::kFp8Block, w, n_out, n_in, x, n_rows, stride);
            EXPECT_LT(nmse(got, want, n_rows, n_out, n_out), 1e-10)
                << "fp8 block " << block << " n_in " << n_in << " n_out " << n_out << " n_rows "
                << n_rows << " pad " << pad;
          }
          if (n_in % 2 == 0) {
            const auto w = testing::random_fp4(n_out, n_in, pad, uint32_t(n_in * 3 + n_out));
            const auto want = testing::reference_fp4(w, n_out, n_in, x.data(), n_rows, stride);
            const auto got = run_plain(Kind::kFp4, w, n_out, n_in, x, n_rows, stride);
            EXPECT_LT(nmse(got, want, n_rows, n_out, n_out), 1e-10)
                << "fp4 n_in " << n_in << " n_out " << n_out << " n_rows " << n_rows << " pad "
                << pad;
          }
        }
}

// Every format through the grouped launch: 4 experts (one empty), 5 tokens x 2 choices sorted
// by expert, rows gathered through input_rows, each group's rows split over 2 slices.
TEST(CudaWarpMatmulEmulated, GroupedMatchesCpuPerToken) {
  const int E = 4, K = 2, T = 5;
  const int64_t n_in = 64, n_out = 5;
  const int32_t idx[T * K] = {0, 1, 3, 0, 1, 3, 0, 3, 1, 0};
  std::vector<int64_t> offsets(E + 1, 0);
  for (int32_t e : idx) ++offsets[e + 1];
  for (int e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
  std::vector<int64_t> fill(offsets.begin(), offsets.end() - 1);
  std::vector<int32_t> rows(T * K), expert_of(T * K);
  for (int i = 0; i < T * K; ++i) {
    const int64_t j = fill[idx[i]]++;
    rows[j] = i / K;
    expert_of[j] = idx[i];
  }
  const auto x = random_input(T, n_in, 3);
  for (int fi = 0; fi < 7; ++fi) {
    const auto k = static_cast<Kind>(fi);
    std::vector<testing::ScaledWeights> w(E);
    std::vector<const void*> wp(E), sp(E);
    for (int e = 0; e < E; ++e) {
      if (k == Kind::kFp8Block)
        w[e] = testing::random_fp8(n_out, n_in, 32, 0, 10 + e);
      else if (k == Kind::kFp4)
        w[e] = testing::random_fp4(n_out, n_in, 0, 10 + e);
      else {
        constexpr DType kTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0,
                                    DType::kQ4_1};
        auto q = kernels::testing::random_weights(kTypes[fi], n_out, n_in, 0, 10 + e);
        w[e].bytes = std::move(q.bytes);
        w[e].row_bytes = q.row_bytes;
      }
      wp[e] = w[e].bytes.data();
      sp[e] = k == Kind::kFp8Block ? static_cast<const void*>(w[e].scale_f32.data())
                                   : w[e].scale_u8.data();
    }
    std::vector<float> y(T * K * n_out, -1.0f);
    Args a;
    a.weights = wp.data();
    a.scales = sp.data();
    a.offsets = offsets.data();
    a.input_rows = rows.data();
    a.weight_row_bytes = w[0].row_bytes;
    a.scale_stride = w[0].scale_stride;
    a.block = 32;
    a.n_out = n_out;
    a.n_in = n_in;
    a.n_rows = T * K;
    a.input = x.data();
    a.input_stride = n_in;
    a.output = y.data();
    a.output_stride = n_out;
    run_kernel(k, a, E, 2);
    for (int64_t j = 0; j < T * K; ++j) {
      const auto& we = w[expert_of[j]];
      const float* xr = &x[rows[j] * n_in];
      std::vector<float> want;
      if (k == Kind::kFp8Block)
        want = testing::reference_fp8(we, n_out, n_in, xr, 1, n_in);
      else if (k == Kind::kFp4)
        want = testing::reference_fp4(we, n_out, n_in, xr, 1, n_in);
      else {
        constexpr DType kTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0,
                                    DType::kQ4_1};
        want = testing::reference_matmul(kTypes[fi], {we.bytes, we.row_bytes}, n_out, n_in,
                                         std::vector<float>(xr, xr + n_in), 1, n_in);
      }
      const std::vector<float> got(y.begin() + j * n_out, y.begin() + (j + 1) * n_out);
      EXPECT_LT(nmse(got, want, 1, n_out, n_out), 1e-10) << "format " << fi << " sorted row " << j;
    }
  }
}

}  // namespace
}  // namespace deepinfer::cuda
