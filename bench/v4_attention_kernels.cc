// Microbenchmark of DeepSeek-V4's two per-query kernels at V4-Flash sizes, scalar vs AVX2 vs AVX-512:
// the Lightning indexer over 1,024 CSA entries (a 4k context) and the sink attention over 640
// keys (window 128 + top-512). Build and run after the main build (docs/benchmarks.md):
//   g++ -O2 -std=c++20 -I src bench/v4_attention_kernels.cc build/libdi_kernels.a build/libdi_base.a \
//       -lfmt -lpthread -o /tmp/v4k && /tmp/v4k
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "deepinfer/kernels/cpu/indexer_score.h"
#include "deepinfer/kernels/cpu/sink_attention.h"
using namespace deepinfer;
using namespace deepinfer::kernels;
int main() {
  std::mt19937 rng(1); std::uniform_real_distribution<float> u(-1, 1);
  const int H = 64, D = 128, N = 1024;  // V4-Flash indexer, 4k context (1024 CSA entries)
  std::vector<float> q(H * D), w(H), keys_data(size_t(N) * D), out(N);
  for (auto& x : q) x = u(rng); for (auto& x : w) x = u(rng); for (auto& x : keys_data) x = u(rng);
  std::vector<const float*> keys(N); for (int i = 0; i < N; ++i) keys[i] = keys_data.data() + size_t(i) * D;
  IndexerScoreParams p{q.data(), w.data(), H, D, 0.088f};
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    double best = 1e9;
    for (int r = 0; r < 20; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      indexer_scores_with_isa(p, keys.data(), N, out.data(), isa);
      best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("indexer H=64 D=128 entries=1024 isa=%d: %.0f us (%.1f GFLOP/s)\n", int(isa), best, 2.0 * H * D * N / best / 1e3);
  }
  // sink attention: 64 heads x 512, 640 keys (window 128 + top-512)
  const int SH = 64, SD = 512, SK = 640;
  std::vector<float> sq(SH * SD), kd(size_t(SK) * SD), so(SH * SD), sc(SK), sinks(SH);
  for (auto& x : sq) x = u(rng) * 0.1f; for (auto& x : kd) x = u(rng); for (auto& x : sinks) x = u(rng);
  std::vector<const float*> sk(SK); for (int i = 0; i < SK; ++i) sk[i] = kd.data() + size_t(i) * SD;
  SinkAttentionParams sp{sq.data(), sk.data(), SK, SH, SD, sinks.data(), 0.044f, so.data(), sc.data()};
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    double best = 1e9;
    for (int r = 0; r < 5; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      sink_attention_with_isa(sp, isa);
      best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("sink attention 64x512, 640 keys isa=%d: %.0f us (%.1f GFLOP/s)\n", int(isa), best, 4.0 * SH * SD * SK / best / 1e3);
  }
}
