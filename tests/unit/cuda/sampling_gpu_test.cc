// GPU greedy argmax against the CPU sampler's greedy rule, and the device Philox draws against
// base/philox.h, both bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "deepinfer/base/philox.h"
#include "deepinfer/kernels/cuda/sampling.h"
#include "gpu_test_util.h"

namespace deepinfer::cuda {
namespace {

// engine::sample's greedy choice: strict '>' from -inf, NaN as -inf.
int32_t cpu_argmax(const float* x, int64_t vocab) {
  float mx = -std::numeric_limits<float>::infinity();
  int32_t arg = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    const float v = std::isnan(x[i]) ? -std::numeric_limits<float>::infinity() : x[i];
    if (v > mx) {
      mx = v;
      arg = static_cast<int32_t>(i);
    }
  }
  return arg;
}

class CudaSampling : public testing::GpuTest {};

TEST_F(CudaSampling, ArgmaxFollowsTheCpuGreedyRule) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);  // many ties
  for (int64_t vocab : {1, 2, 255, 4097, 151936}) {
    const int64_t rows = 6, stride = vocab + 2;
    std::vector<float> x(rows * stride);
    for (auto& v : x) v = static_cast<float>(small(rng));
    for (int64_t i = 0; i < vocab; ++i) x[1 * stride + i] = -INFINITY;  // nothing allowed: -1
    for (int64_t i = 0; i < vocab; i += 3) x[2 * stride + i] = NAN;
    x[3 * stride + vocab - 1] = INFINITY;                          // forced token
    for (int64_t i = 0; i < vocab; ++i) x[4 * stride + i] = 1.0f;  // all tied: id 0
    DeviceBuffer dx = upload(x), dt = upload(std::vector<int32_t>(rows, -7));
    ArgmaxParams p;
    p.logits = dx.as<float>();
    p.rows = rows;
    p.vocab = vocab;
    p.stride = stride;
    p.tokens = dt.as<int32_t>();
    argmax_rows(p, stream());
    const auto got = download<int32_t>(dt, rows);
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_EQ(got[r], cpu_argmax(&x[r * stride], vocab)) << "vocab " << vocab << " row " << r;
  }
}

TEST_F(CudaSampling, PhiloxDrawsAreTheCpuDraws) {
  std::mt19937_64 rng(8);
  const int64_t n = 10000;
  std::vector<uint64_t> seed(n), sid(n), step(n);
  for (int64_t i = 0; i < n; ++i) {
    seed[i] = i < 100 ? uint64_t(i) : rng();
    sid[i] = i % 3 == 0 ? 0 : rng();
    step[i] = i % 5 == 0 ? uint64_t(i) : rng();
  }
  DeviceBuffer ds = upload(seed), di = upload(sid), dp = upload(step),
               dout = upload(std::vector<double>(n));
  PhiloxParams p;
  p.seed = ds.as<uint64_t>();
  p.stream_id = di.as<uint64_t>();
  p.step = dp.as<uint64_t>();
  p.n = n;
  p.out = dout.as<double>();
  philox_uniform_double(p, stream());
  const auto got = download<double>(dout, n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], deepinfer::philox_uniform_double(seed[i], sid[i], step[i]))
        << "seed " << seed[i] << " stream " << sid[i] << " step " << step[i];
}

}  // namespace
}  // namespace deepinfer::cuda
