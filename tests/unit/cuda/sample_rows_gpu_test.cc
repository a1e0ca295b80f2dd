// sample_rows against engine::sample (the CPU sampler itself): the same token, bitwise, over
// many logit rows, settings and seeds. The device's double sums run in another order than the
// CPU's, so a mismatch is possible in principle when a sum lands within rounding (~1e-16
// relative) of a boundary; with random rows that has probability ~1e-13 per draw.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "deepinfer/engine/sampler.h"
#include "deepinfer/kernels/cuda/checks.h"
#include "deepinfer/kernels/cuda/sampling.h"
#include "gpu_test_util.h"
#include "logit_rows_util.h"

namespace deepinfer::cuda {
namespace {

struct Case {
  engine::SamplingParams params;
  uint64_t request_key = 0, step = 0;
};

std::string describe(const Case& c, int64_t vocab, int pattern, int64_t row) {
  std::ostringstream o;
  o << "vocab " << vocab << " pattern " << pattern << " row " << row << " temperature "
    << c.params.temperature << " top_k " << c.params.top_k << " top_p " << c.params.top_p
    << " min_p " << c.params.min_p << " seed " << c.params.seed << " has_seed " << c.params.has_seed
    << " request_key " << c.request_key << " step " << c.step;
  return o.str();
}

Case random_case(int64_t vocab, std::mt19937_64& rng) {
  constexpr float kTemps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.7f};
  constexpr float kTopP[] = {1.0f, 1.0f, 0.95f, 0.6f, 0.1f};
  constexpr float kMinP[] = {0.0f, 0.0f, 0.02f, 0.3f};
  const int top_ks[] = {0, 0, 1, 3, 40, static_cast<int>(vocab), static_cast<int>(vocab) + 7};
  Case c;
  c.params.temperature = kTemps[rng() % 5];
  c.params.top_k = top_ks[rng() % 7];
  c.params.top_p = kTopP[rng() % 5];
  c.params.min_p = kMinP[rng() % 4];
  c.params.has_seed = rng() % 2;
  c.params.seed = rng();
  c.request_key = rng();
  c.step = rng() % 3 ? rng() % 1000 : rng();
  return c;
}

class CudaSampleRows : public testing::GpuTest {};

TEST_F(CudaSampleRows, SameTokenAsTheCpuSampler) {
  std::mt19937 rng(5);
  std::mt19937_64 prng(6);
  for (int64_t vocab : {1, 2, 50, 1000, 32000, 151936})
    for (int pattern = 0; pattern < 4; ++pattern) {
      const int64_t rows = vocab > 50000 ? 24 : 96, stride = vocab + 3;
      std::vector<float> x(rows * stride);
      std::vector<Case> cases(rows);
      std::vector<SampleRow> rp(rows);
      for (int64_t r = 0; r < rows; ++r) {
        fill_row(&x[r * stride], vocab, pattern, rng);
        cases[r] = random_case(vocab, prng);
        const auto& sp = cases[r].params;
        rp[r] = make_sample_row(sp.temperature, sp.top_k, sp.top_p, sp.min_p, sp.seed,
                                sp.has_seed ? 0 : cases[r].request_key, cases[r].step);
        ASSERT_TRUE(check_sample_row(rp[r]).is_ok()) << check_sample_row(rp[r]).message();
      }
      if (pattern == 3 && rows > 2) {
        for (int64_t i = 0; i < vocab; ++i) x[0 * stride + i] = -INFINITY;  // nothing allowed
        x[1 * stride + vocab / 2] = INFINITY;                               // forced token
      }
      const int64_t scratch = sample_scratch_elems(vocab);
      DeviceBuffer dx = upload(x), dp = upload(rp),
                   ds = upload(std::vector<uint64_t>(rows * scratch)),
                   dt = upload(std::vector<int32_t>(rows, -7));
      SampleParams p{dx.as<float>(),    rows,    vocab,           stride, dp.as<SampleRow>(),
                     ds.as<uint64_t>(), scratch, dt.as<int32_t>()};
      ASSERT_TRUE(check_sample_rows(p).is_ok()) << check_sample_rows(p).message();
      sample_rows(p, stream());
      const auto got = download<int32_t>(dt, rows);
      for (int64_t r = 0; r < rows; ++r) {
        const auto want =
            engine::sample(&x[r * stride], static_cast<int32_t>(vocab), cases[r].params,
                           engine::SamplerState{}, cases[r].request_key, cases[r].step, nullptr);
        EXPECT_EQ(got[r], want.token) << describe(cases[r], vocab, pattern, r);
      }
    }
}

// Many seeds over one row: the draws spread over the candidates exactly as the CPU's.
TEST_F(CudaSampleRows, ManySeedsOneRow) {
  const int64_t vocab = 4096, rows = 2000;
  std::mt19937 rng(9);
  std::vector<float> row(vocab);
  fill_row(row.data(), vocab, 0, rng);
  std::vector<float> x;
  for (int64_t r = 0; r < rows; ++r) x.insert(x.end(), row.begin(), row.end());
  engine::SamplingParams sp;
  sp.temperature = 1.2f;
  sp.top_p = 0.9f;
  sp.has_seed = true;
  for (int top_k : {0, 50}) {
    sp.top_k = top_k;
    std::vector<SampleRow> rp(rows);
    for (int64_t r = 0; r < rows; ++r)
      rp[r] = make_sample_row(sp.temperature, top_k, sp.top_p, 0.0f, r, 0, 3);
    const int64_t scratch = sample_scratch_elems(vocab);
    DeviceBuffer dx = upload(x), dp = upload(rp),
                 ds = upload(std::vector<uint64_t>(rows * scratch)),
                 dt = upload(std::vector<int32_t>(rows, -7));
    SampleParams p{dx.as<float>(),    rows,    vocab,           vocab, dp.as<SampleRow>(),
                   ds.as<uint64_t>(), scratch, dt.as<int32_t>()};
    sample_rows(p, stream());
    const auto got = download<int32_t>(dt, rows);
    for (int64_t r = 0; r < rows; ++r) {
      sp.seed = static_cast<uint64_t>(r);
      const auto want = engine::sample(row.data(), static_cast<int32_t>(vocab), sp,
                                       engine::SamplerState{}, 0, 3, nullptr);
      ASSERT_EQ(got[r], want.token) << "seed " << r << " top_k " << top_k;
    }
  }
}

}  // namespace
}  // namespace deepinfer::cuda
