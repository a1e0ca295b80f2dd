// grouped_matmul (MoE rows sorted by expert) against the CPU scalar reference of each row's
// token through its expert, for every weight format, and bitwise against the single-weight
// launch of the same expert (a grouped row is that launch's row). Tolerance as the plain
// kernels (docs/cuda.md): normalized MSE < 1e-10.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "../matmul/matmul_test_util.h"
#include "deepinfer/kernels/cuda/checks.h"
#include "deepinfer/kernels/cuda/matmul.h"
#include "deepinfer/kernels/cuda/moe_matmul.h"
#include "gpu_test_util.h"
#include "matmul_gpu_test_util.h"
#include "scaled_weights_util.h"

namespace deepinfer::cuda {
namespace {

using kernels::testing::nmse;
using kernels::testing::random_input;

const char* format_name(GroupedWeight f) {
  constexpr const char* kNames[] = {"f32", "f16", "bf16", "q8_0", "q4_1", "fp8", "fp4"};
  return kNames[static_cast<int>(f)];
}
DType dtype_of(GroupedWeight f) {
  constexpr DType kTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_1};
  return kTypes[static_cast<int>(f)];
}

// One expert's weight in any format, on the host.
struct Expert {
  testing::ScaledWeights w;  // bytes/row_bytes for every format; scales for FP8/FP4
};

Expert random_expert(GroupedWeight f, int64_t n_out, int64_t n_in, uint32_t seed) {
  Expert e;
  if (f == GroupedWeight::kFp8Block) {
    e.w = testing::random_fp8(n_out, n_in, 128, 0, seed);
  } else if (f == GroupedWeight::kFp4) {
    e.w = testing::random_fp4(n_out, n_in, 0, seed);
  } else {
    auto k = kernels::testing::random_weights(dtype_of(f), n_out, n_in, 0, seed);
    e.w.bytes = std::move(k.bytes);
    e.w.row_bytes = k.row_bytes;
  }
  return e;
}

std::vector<float> reference(GroupedWeight f, const Expert& e, int64_t n_out, int64_t n_in,
                             const float* x) {
  if (f == GroupedWeight::kFp8Block) return testing::reference_fp8(e.w, n_out, n_in, x, 1, n_in);
  if (f == GroupedWeight::kFp4) return testing::reference_fp4(e.w, n_out, n_in, x, 1, n_in);
  kernels::testing::Weights k{e.w.bytes, e.w.row_bytes};
  return testing::reference_matmul(dtype_of(f), k, n_out, n_in, std::vector<float>(x, x + n_in), 1,
                                   n_in);
}

class CudaMoeMatmul : public testing::GpuTest {};

// T tokens choose K distinct experts each among E (two experts get none); rows are sorted by
// expert exactly as model/moe.cc's moe_forward sorts them.
TEST_F(CudaMoeMatmul, MatchesCpuPerTokenAndSingleWeightLaunch) {
  const int E = 6, K = 2;
  const int live[] = {0, 1, 3, 4};
  for (int fi = 0; fi < 7; ++fi)
    for (int64_t n_in : {256, 2048})
      for (int64_t T : {1, 13}) {
        const auto f = static_cast<GroupedWeight>(fi);
        const int64_t n_out = 72;
        std::mt19937 rng(uint32_t(fi * 100 + n_in + T));
        std::vector<int32_t> idx(T * K);
        for (int64_t t = 0; t < T; ++t) {
          idx[t * K] = live[rng() % 4];
          do idx[t * K + 1] = live[rng() % 4];
          while (idx[t * K + 1] == idx[t * K]);
        }
        std::vector<int64_t> offsets(E + 1, 0);
        for (int32_t e : idx) ++offsets[e + 1];
        for (int e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
        std::vector<int64_t> fill(offsets.begin(), offsets.end() - 1), order(T * K);
        for (int64_t i = 0; i < T * K; ++i) order[fill[idx[i]]++] = i;
        std::vector<int32_t> rows(T * K);
        int64_t max_rows = 0;
        for (int64_t j = 0; j < T * K; ++j) rows[j] = static_cast<int32_t>(order[j] / K);
        for (int e = 0; e < E; ++e) max_rows = std::max(max_rows, offsets[e + 1] - offsets[e]);

        std::vector<Expert> experts;
        std::vector<DeviceBuffer> dw, ds;
        std::vector<const void*> wptr, sptr;
        for (int e = 0; e < E; ++e) {
          experts.push_back(random_expert(f, n_out, n_in, uint32_t(e * 31 + fi)));
          dw.push_back(upload(experts[e].w.bytes));
          ds.push_back(f == GroupedWeight::kFp8Block ? upload(experts[e].w.scale_f32)
                                                     : upload(experts[e].w.scale_u8));
          wptr.push_back(dw.back().data());
          sptr.push_back(ds.back().data());
        }
        const auto x = random_input(T, n_in, uint32_t(T));
        DeviceBuffer dx = upload(x), dwp = upload(wptr), dsp = upload(sptr), doff = upload(offsets),
                     drows = upload(rows), dy = upload(std::vector<float>(T * K * n_out, 0.0f));
        GroupedMatmulParams p;
        p.format = f;
        p.weights = dwp.as<const void*>();
        p.scales = dsp.as<const void*>();
        p.weight_row_bytes = experts[0].w.row_bytes;
        p.scale_stride = experts[0].w.scale_stride;
        p.block = 128;
        p.n_groups = E;
        p.n_out = n_out;
        p.n_in = n_in;
        p.group_offsets = doff.as<int64_t>();
        p.input_rows = drows.as<int32_t>();
        p.input = dx.as<float>();
        p.input_stride = n_in;
        p.n_rows = T * K;
        p.output = dy.as<float>();
        p.output_stride = n_out;
        const Status st = check_grouped_matmul(p);
        ASSERT_TRUE(st.is_ok()) << st.message();
        grouped_matmul(p, stream());
        const auto got = download<float>(dy, T * K * n_out);
        p.max_group_rows = max_rows;  // rows of a group split over blocks: the same bits
        grouped_matmul(p, stream());
        const auto split = download<float>(dy, T * K * n_out);
        EXPECT_EQ(std::memcmp(got.data(), split.data(), got.size() * sizeof(float)), 0)
            << format_name(f) << " n_in " << n_in << " T " << T;

        std::vector<float> want(T * K * n_out);
        for (int64_t j = 0; j < T * K; ++j) {
          const auto r = reference(f, experts[idx[order[j]]], n_out, n_in, &x[rows[j] * n_in]);
          std::copy(r.begin(), r.end(), want.begin() + j * n_out);
        }
        EXPECT_LT(nmse(got, want, T * K, n_out, n_out), 1e-10)
            << format_name(f) << " n_in " << n_in << " T " << T;

        // Each expert as a plain launch over all tokens: row t must equal the grouped row bitwise.
        for (int e : live) {
          DeviceBuffer all = upload(std::vector<float>(T * n_out, 0.0f));
          if (f == GroupedWeight::kFp8Block || f == GroupedWeight::kFp4) {
            Fp8MatmulParams q8;
            Fp4MatmulParams q4;
            if (f == GroupedWeight::kFp8Block) {
              q8 = {dw[e].as<uint8_t>(),
                    p.weight_row_bytes,
                    ds[e].as<float>(),
                    p.scale_stride,
                    128,
                    n_out,
                    n_in,
                    dx.as<float>(),
                    T,
                    n_in,
                    all.as<float>(),
                    n_out};
              fp8_matmul(q8, stream());
            } else {
              q4 = {dw[e].as<uint8_t>(),
                    p.weight_row_bytes,
                    ds[e].as<uint8_t>(),
                    p.scale_stride,
                    n_out,
                    n_in,
                    dx.as<float>(),
                    T,
                    n_in,
                    all.as<float>(),
                    n_out};
              fp4_matmul(q4, stream());
            }
          } else {
            MatmulParams m{dw[e].data(),       dtype_of(f),    n_out, n_in,
                           p.weight_row_bytes, dx.as<float>(), T,     n_in,
                           all.as<float>(),    n_out};
            warp_matmul(m, stream());
          }
          const auto plain = download<float>(all, T * n_out);
          for (int64_t j = offsets[e]; j < offsets[e + 1]; ++j)
            EXPECT_EQ(std::memcmp(&plain[rows[j] * n_out], &got[j * n_out], n_out * sizeof(float)),
                      0)
                << format_name(f) << " expert " << e << " sorted row " << j;
        }
      }
}

}  // namespace
}  // namespace deepinfer::cuda
