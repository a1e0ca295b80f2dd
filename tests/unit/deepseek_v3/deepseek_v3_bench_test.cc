// Throughput of a DeepSeek-V3 model through the engine, with the share of forward time in MLA
// attention vs MoE. Not a test (timing belongs in benchmarks): disabled unless run as
//   DEEPINFER_DS_BENCH_MODEL=DIR test_deepseek_v3 --gtest_also_run_disabled_tests
//     --gtest_filter='*Bench*'
// with DIR from `python3 tests/reference/make_tiny_deepseek_v3.py --mini DIR`.
#include <cstdlib>
#include <random>

#include "ds_fixture.h"
#include "deepinfer/base/timer.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer {
namespace {

struct BenchRun {
  double tokens_per_s = 0;
  model::DeepseekForwardTimes times;
};

BenchRun measure(engine::Engine& e, model::DeepseekV3& m, bool prefill, int batch, int prompt_len, int gen_len) {
  std::mt19937 rng(batch);
  std::uniform_int_distribution<int32_t> tok(100, 30000);
  for (int b = 0; b < batch; ++b) {
    engine::GenerationRequest r;
    for (int i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(tok(rng));
    r.max_tokens = prefill ? 1 : gen_len;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    EXPECT_TRUE(e.add_request(r).is_ok());
  }
  m.reset_forward_times();
  double t0 = now_seconds();
  int64_t generated = 0, counted_from = 0;
  bool decoding = false;
  while (e.has_unfinished()) {
    for (const auto& out : e.step()) generated += static_cast<int64_t>(out.new_token_ids.size());
    if (!prefill && !decoding && generated >= batch) {  // every sequence has its first token
      decoding = true;
      counted_from = generated;
      m.reset_forward_times();
      t0 = now_seconds();
    }
  }
  BenchRun r;
  const double secs = now_seconds() - t0;
  r.tokens_per_s = prefill ? double(batch) * prompt_len / secs : double(generated - counted_from) / secs;
  r.times = m.forward_times();
  return r;
}

TEST(DeepseekV3Bench, DISABLED_MiniModelThroughput) {
  const char* dir = std::getenv("DEEPINFER_DS_BENCH_MODEL");
  if (!dir) GTEST_SKIP() << "set DEEPINFER_DS_BENCH_MODEL";
  auto tok = recipe::Tokenizer::from_hf_dir(dir);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  std::shared_ptr<const recipe::Tokenizer> tokenizer(std::move(tok).value());
  const int threads = std::getenv("DEEPINFER_DS_BENCH_THREADS") ? std::atoi(std::getenv("DEEPINFER_DS_BENCH_THREADS")) : 0;
  for (bool prefill : {true, false}) {
    for (int batch : {1, 32}) {
      auto loaded = dstest::open_dir(dir);
      ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
      auto* m = dynamic_cast<model::DeepseekV3*>(loaded->get());
      ASSERT_NE(m, nullptr);
      engine::EngineConfig cfg;
      cfg.num_threads = threads;
      cfg.kv_cache_bytes = size_t{256} << 20;
      auto e = engine::Engine::create(std::move(*loaded), tokenizer, cfg);
      ASSERT_TRUE(e.is_ok()) << e.status().message();
      const BenchRun r = measure(**e, *m, prefill, batch, prefill ? 256 : 64, 32);
      const auto& t = r.times;
      std::printf("{\"mode\":\"%s\",\"batch\":%d,\"threads\":%d,\"tokens_per_s\":%.2f,\"forwards\":%lld,"
                  "\"attention_share\":%.3f,\"moe_share\":%.3f,\"dense_mlp_share\":%.3f,\"rest_share\":%.3f}\n",
                  prefill ? "prefill" : "decode", batch, (*e)->num_threads(), r.tokens_per_s,
                  static_cast<long long>(t.forwards), t.attention / t.total, t.moe / t.total,
                  t.dense_mlp / t.total, (t.total - t.attention - t.moe - t.dense_mlp) / t.total);
    }
  }
}

}  // namespace
}  // namespace deepinfer
