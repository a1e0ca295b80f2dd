// DeepSeek-V4 forward against transformers' DeepseekV4ForCausalLM on the tiny checkpoints of
// tests/reference/make_tiny_deepseek_v4.py: logits at every prompt position (one prefill), the
// greedy continuation decoded one token per forward through the paged state with the logits of
// every step, and chunked prefill with chunks that do not divide the compression ratios, with
// two sequences sharing each batch.
#include "v4_fixture.h"

namespace deepinfer {
namespace {

using v4test::PagedSeq;

class DeepseekV4Fixture : public ::testing::TestWithParam<const char*> {};

TEST_P(DeepseekV4Fixture, PrefillLogitsMatchTransformers) {
  const std::string name = GetParam();
  auto m = v4test::open_fixture(name);
  ASSERT_NE(m, nullptr);
  const int64_t V = m->config().vocab_size;
  ThreadPool pool(2);
  float worst = 0;
  const auto fx = v4test::expected(name);  // named: a temporary in the range-for would dangle
  int compared = 0;
  for (const auto& c : fx["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::vector<float> logits = testing::all_position_logits(*m, ids, pool);
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      const float d =
          v4test::max_abs_diff(logits.data() + pos * V, c["logits"][pos].get<std::vector<float>>());
      EXPECT_LT(d, v4test::kTol) << name << ": " << ids.size() << " tokens, position " << pos;
      worst = std::max(worst, d);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 5 + 13 + 37);
  std::printf("%s prefill: max |logit - HF| = %.2e\n", name.c_str(), worst);
}

// Whole-prompt prefill, then one token per forward: the greedy tokens equal transformers' and
// every step's logits match its incremental decode.
TEST_P(DeepseekV4Fixture, GreedyDecodeMatchesTransformers) {
  const std::string name = GetParam();
  auto m = v4test::open_fixture(name);
  ASSERT_NE(m, nullptr);
  const int64_t V = m->config().vocab_size;
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  float worst = 0;
  const auto fx = v4test::expected(name);
  int steps = 0;
  const int block_size = v4test::block_size_of(*m);
  const int recent = m->kv_cache_spec().recent_tokens;
  for (const auto& c : fx["cases"]) {
    PagedSeq s{c["ids"].get<std::vector<int32_t>>(), {}, 0};
    const auto greedy = c["greedy"].get<std::vector<int32_t>>();
    const int total = static_cast<int>(s.ids.size() + greedy.size());
    for (int i = 0; i < (total + block_size - 1) / block_size; ++i)
      s.blocks.push_back(30 - 2 * i);  // scattered
    // Recent rows in a ring just big enough for the prefill step: during decode, slabs are
    // reused for newer blocks while older blocks lose theirs.
    s.slab_ring = (static_cast<int>(s.ids.size()) + recent) / block_size + 2;
    model::KvCache cache =
        model::KvCache::allocate(m->kv_cache_spec(), 32, block_size, s.slab_ring);
    int n = static_cast<int>(s.ids.size());
    for (size_t step = 0; step < greedy.size(); ++step) {
      ForwardBatch b;
      v4test::add_step(b, s, n, block_size, recent);
      std::vector<float> logits(b.logits_rows.size() * V);
      Status st = m->forward(b, cache, ctx, logits.data());
      ASSERT_TRUE(st.is_ok()) << st.message();
      const float* last = logits.data() + (b.logits_rows.size() - 1) * V;
      const float d =
          v4test::max_abs_diff(last, c["greedy_logits"][step].get<std::vector<float>>());
      EXPECT_LT(d, v4test::kTol) << name << " step " << step;
      worst = std::max(worst, d);
      EXPECT_EQ(v4test::argmax(last, V), greedy[step]) << name << " step " << step;
      s.ids.push_back(greedy[step]);
      n = 1;
      ++steps;
    }
  }
  EXPECT_EQ(steps, 3 * 8);
  std::printf("%s decode: max |logit - HF| = %.2e\n", name.c_str(), worst);
}

// Two sequences in one batch per step, each prefilled in chunks of 3 (the long one) and 5
// (the other): chunk boundaries fall inside CSA (4) and HCA (8/16) windows.
TEST_P(DeepseekV4Fixture, ChunkedBatchedPrefillMatchesTransformers) {
  const std::string name = GetParam();
  auto m = v4test::open_fixture(name);
  ASSERT_NE(m, nullptr);
  const int64_t V = m->config().vocab_size;
  const auto fx = v4test::expected(name);
  const int block_size = v4test::block_size_of(*m);
  const int recent = m->kv_cache_spec().recent_tokens;
  // Two slab rings, one per sequence, each big enough for one chunk plus the recent tokens.
  const int ring = (5 + recent) / block_size + 2;
  model::KvCache cache = model::KvCache::allocate(m->kv_cache_spec(), 24, block_size, 2 * ring);
  PagedSeq a{fx["cases"][2]["ids"].get<std::vector<int32_t>>(),
             {9, 2, 14, 5, 0, 20, 17, 3, 22, 11},
             0,
             0,
             ring};
  PagedSeq b{fx["cases"][1]["ids"].get<std::vector<int32_t>>(), {7, 13, 1, 23}, 0, ring, ring};
  const auto& ref_a = fx["cases"][2]["logits"];
  const auto& ref_b = fx["cases"][1]["logits"];
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  float worst = 0;
  while (a.computed < static_cast<int>(a.ids.size()) ||
         b.computed < static_cast<int>(b.ids.size())) {
    ForwardBatch batch;
    std::vector<std::pair<int, const nlohmann::json*>> order;  // (first position, reference)
    if (a.computed < static_cast<int>(a.ids.size())) {
      order.push_back({a.computed, &ref_a});
      v4test::add_step(batch, a, std::min<int>(3, a.ids.size() - a.computed), block_size, recent);
    }
    if (b.computed < static_cast<int>(b.ids.size())) {
      order.push_back({b.computed, &ref_b});
      v4test::add_step(batch, b, std::min<int>(5, b.ids.size() - b.computed), block_size, recent);
    }
    std::vector<float> logits(batch.logits_rows.size() * V);
    Status st = m->forward(batch, cache, ctx, logits.data());
    ASSERT_TRUE(st.is_ok()) << st.message();
    for (size_t s = 0; s < order.size(); ++s)
      for (int t = batch.seq_token_start[s]; t < batch.seq_token_start[s + 1]; ++t) {
        const int pos = order[s].first + (t - batch.seq_token_start[s]);
        const float d = v4test::max_abs_diff(logits.data() + int64_t{t} * V,
                                             (*order[s].second)[pos].get<std::vector<float>>());
        EXPECT_LT(d, v4test::kTol) << name << " seq " << s << " position " << pos;
        worst = std::max(worst, d);
      }
  }
  std::printf("%s chunked+batched: max |logit - HF| = %.2e\n", name.c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepseekV4Fixture, ::testing::ValuesIn(v4test::kFixtures));

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

// Queries are split over the pool's threads: 1 and 3 threads give the same logits.
TEST(DeepseekV4Threads, ThreadCountDoesNotChangeLogits) {
  auto m = v4test::open_fixture("h2_mixed");
  ASSERT_NE(m, nullptr);
  const auto ids = v4test::expected("h2_mixed")["cases"][2]["ids"].get<std::vector<int32_t>>();
  ThreadPool one(1), three(3);
  const std::vector<float> a = testing::all_position_logits(*m, ids, one);
  const std::vector<float> b = testing::all_position_logits(*m, ids, three);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_LT(v4test::max_abs_diff(a.data(), b), 1e-5f);
}

}  // namespace
}  // namespace deepinfer
