// The device sampler's kernel source (sample_rows_kernel.cuh) compiled as host code and run
// block by block with fibers (device_emulation.h), against engine::sample: checks the kernel's
// logic (candidate lists, radix select, bitonic sort, bucket edge, min-p, the draw, barriers)
// here, without a GPU. Host exp stands in for the device's; sample_rows_gpu_test.cc checks the
// real thing on a GPU.
#include "device_emulation.h"
// (the shim first)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "deepinfer/engine/sampler.h"
#include "deepinfer/kernels/cuda/sample_rows_kernel.cuh"
#include "logit_rows_util.h"

namespace deepinfer::cuda {
namespace {

TEST(CudaSampleRowsEmulated, SameTokenAsTheCpuSampler) {
  constexpr float kTemps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.7f};
  constexpr float kTopP[] = {1.0f, 1.0f, 0.95f, 0.6f, 0.1f};
  constexpr float kMinP[] = {0.0f, 0.0f, 0.02f, 0.3f};
  std::mt19937 rng(5);
  std::mt19937_64 prng(6);
  int compared = 0;
  for (int64_t vocab : {1, 2, 50, 700, 5000})
    for (int pattern = 0; pattern < 4; ++pattern) {
      const int64_t rows = 12, stride = vocab + 3, scratch = sample_scratch_elems(vocab);
      std::vector<float> x(rows * stride);
      std::vector<engine::SamplingParams> sp(rows);
      std::vector<uint64_t> keys(rows), steps(rows);
      std::vector<SampleRow> rp(rows);
      const int top_ks[] = {0, 0, 1, 3, 40, static_cast<int>(vocab), static_cast<int>(vocab) + 7};
      for (int64_t r = 0; r < rows; ++r) {
        fill_row(&x[r * stride], vocab, pattern, rng);
        sp[r].temperature = kTemps[prng() % 5];
        sp[r].top_k = top_ks[prng() % 7];
        sp[r].top_p = kTopP[prng() % 5];
        sp[r].min_p = kMinP[prng() % 4];
        sp[r].has_seed = prng() % 2;
        sp[r].seed = prng();
        keys[r] = prng();
        steps[r] = prng() % 1000;
        rp[r] = make_sample_row(sp[r].temperature, sp[r].top_k, sp[r].top_p, sp[r].min_p,
                                sp[r].seed, sp[r].has_seed ? 0 : keys[r], steps[r]);
      }
      if (pattern == 3) {
        for (int64_t i = 0; i < vocab; ++i) x[i] = -INFINITY;  // row 0: nothing allowed
        x[1 * stride + vocab / 2] = INFINITY;                  // row 1: forced
      }
      std::vector<uint64_t> scr(rows * scratch);
      std::vector<int32_t> tokens(rows, -7);
      const SampleParams p{x.data(),  rows,       vocab,   stride,
                           rp.data(), scr.data(), scratch, tokens.data()};
      emulation::launch({static_cast<unsigned>(rows), 1, 1}, detail::kThreads,
                        [&] { detail::sampler::sample_kernel(p); });
      for (int64_t r = 0; r < rows; ++r) {
        const auto want = engine::sample(&x[r * stride], static_cast<int32_t>(vocab), sp[r],
                                         engine::SamplerState{}, keys[r], steps[r], nullptr);
        EXPECT_EQ(tokens[r], want.token)
            << "vocab " << vocab << " pattern " << pattern << " row " << r << " temperature "
            << sp[r].temperature << " top_k " << sp[r].top_k << " top_p " << sp[r].top_p
            << " min_p " << sp[r].min_p;
        ++compared;
      }
    }
  EXPECT_EQ(compared, 5 * 4 * 12);
}

}  // namespace
}  // namespace deepinfer::cuda
