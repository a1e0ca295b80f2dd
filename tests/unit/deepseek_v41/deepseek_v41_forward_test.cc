// The DeepSeek-V4.1 model (the layer loop over the paged state) against the reference on the tiny
// fixture: logits at every prompt position in one prefill; the greedy continuation one token per
// forward with a recent-slab ring smaller than the sequence; and two sequences batched, prefilled
// in chunks of 3 and 5 (boundaries inside ratio-2 windows), whose Engram n-grams reach back
// across the chunk boundary through ForwardBatch::seq_token_history.
#include "../deepseek_v4/v4_fixture.h"
#include "deepinfer/model/deepseek_v41.h"
#include "v41_fixture.h"

namespace deepinfer {
namespace {

using v4test::PagedSeq;

constexpr float kTol = 1e-4f;  // measured: about 1e-5

std::unique_ptr<model::Model> open_v41() {
  auto m = v4test::open_dir(v41test::fixture_dir());
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return nullptr;
  EXPECT_NE(dynamic_cast<model::DeepseekV41*>(m->get()), nullptr);
  return std::move(m).value();
}

// v4test::add_step, plus the sequence's token ids before the step (Engram's history).
void add_step(ForwardBatch& b, PagedSeq& s, int n, int block_size, const model::KvCacheSpec& spec) {
  const int first = s.computed;
  v4test::add_step(b, s, n, block_size, spec.recent_tokens);
  for (int pos = first - spec.token_history; pos < first; ++pos)
    b.seq_token_history.push_back(pos < 0 ? -1 : s.ids[pos]);
}

TEST(DeepseekV41Forward, PrefillLogitsMatchTheReference) {
  auto m = open_v41();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->kv_cache_spec().token_history, 3);
  const int64_t V = m->config().vocab_size;
  ThreadPool pool(2);
  const nlohmann::json fx = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  float worst = 0;
  int compared = 0;
  for (const auto& c : fx["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::vector<float> logits = testing::all_position_logits(*m, ids, pool);
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      const float d =
          v4test::max_abs_diff(logits.data() + pos * V, c["logits"][pos].get<std::vector<float>>());
      EXPECT_LT(d, kTol) << ids.size() << " tokens, position " << pos;
      worst = std::max(worst, d);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 5 + 13 + 37);
  std::printf("deepseek_v41 prefill: max |logit - reference| = %.2e\n", worst);
}

// Whole-prompt prefill, then one token per forward: the greedy tokens equal the reference's and
// every step's logits match.
TEST(DeepseekV41Forward, GreedyDecodeMatchesTheReference) {
  auto m = open_v41();
  ASSERT_NE(m, nullptr);
  const int64_t V = m->config().vocab_size;
  const model::KvCacheSpec spec = m->kv_cache_spec();
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  const nlohmann::json fx = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  const int block_size = std::max(4, spec.block_size_multiple);
  float worst = 0;
  int steps = 0;
  for (const auto& c : fx["cases"]) {
    PagedSeq s{c["ids"].get<std::vector<int32_t>>(), {}, 0};
    const auto greedy = c["greedy"].get<std::vector<int32_t>>();
    const int total = static_cast<int>(s.ids.size() + greedy.size());
    for (int i = 0; i < (total + block_size - 1) / block_size; ++i) s.blocks.push_back(30 - 2 * i);
    s.slab_ring = (static_cast<int>(s.ids.size()) + spec.recent_tokens) / block_size + 2;
    model::KvCache cache = model::KvCache::allocate(spec, 32, block_size, s.slab_ring);
    int n = static_cast<int>(s.ids.size());
    for (size_t step = 0; step < greedy.size(); ++step) {
      ForwardBatch b;
      add_step(b, s, n, block_size, spec);
      std::vector<float> logits(b.logits_rows.size() * V);
      Status st = m->forward(b, cache, ctx, logits.data());
      ASSERT_TRUE(st.is_ok()) << st.message();
      const float* last = logits.data() + (b.logits_rows.size() - 1) * V;
      const float d =
          v4test::max_abs_diff(last, c["greedy_logits"][step].get<std::vector<float>>());
      EXPECT_LT(d, kTol) << "step " << step;
      worst = std::max(worst, d);
      EXPECT_EQ(v4test::argmax(last, V), greedy[step]) << "step " << step;
      s.ids.push_back(greedy[step]);
      n = 1;
      ++steps;
    }
  }
  EXPECT_EQ(steps, 3 * 8);
  std::printf("deepseek_v41 decode: max |logit - reference| = %.2e\n", worst);
}

TEST(DeepseekV41Forward, ChunkedBatchedPrefillMatchesTheReference) {
  auto m = open_v41();
  ASSERT_NE(m, nullptr);
  const int64_t V = m->config().vocab_size;
  const model::KvCacheSpec spec = m->kv_cache_spec();
  const nlohmann::json fx = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  const int block_size = std::max(4, spec.block_size_multiple);
  const int ring = (5 + spec.recent_tokens) / block_size + 2;
  model::KvCache cache = model::KvCache::allocate(spec, 24, block_size, 2 * ring);
  PagedSeq a{fx["cases"][2]["ids"].get<std::vector<int32_t>>(),
             {9, 2, 14, 5, 0, 20, 17, 3, 22, 11},
             0,
             0,
             ring};
  PagedSeq b{fx["cases"][1]["ids"].get<std::vector<int32_t>>(), {7, 13, 1, 23}, 0, ring, ring};
  const auto& ref_a = fx["cases"][2]["logits"];
  const auto& ref_b = fx["cases"][1]["logits"];
  ThreadPool pool(2);
  model::ForwardContext ctx{&pool, false};
  float worst = 0;
  while (a.computed < static_cast<int>(a.ids.size()) ||
         b.computed < static_cast<int>(b.ids.size())) {
    ForwardBatch batch;
    std::vector<std::pair<int, const nlohmann::json*>> order;  // (first position, reference)
    if (a.computed < static_cast<int>(a.ids.size())) {
      order.push_back({a.computed, &ref_a});
      add_step(batch, a, std::min<int>(3, a.ids.size() - a.computed), block_size, spec);
    }
    if (b.computed < static_cast<int>(b.ids.size())) {
      order.push_back({b.computed, &ref_b});
      add_step(batch, b, std::min<int>(5, b.ids.size() - b.computed), block_size, spec);
    }
    std::vector<float> logits(batch.logits_rows.size() * V);
    Status st = m->forward(batch, cache, ctx, logits.data());
    ASSERT_TRUE(st.is_ok()) << st.message();
    for (size_t s = 0; s < order.size(); ++s)
      for (int t = batch.seq_token_start[s]; t < batch.seq_token_start[s + 1]; ++t) {
        const int pos = order[s].first + (t - batch.seq_token_start[s]);
        const float d = v4test::max_abs_diff(logits.data() + int64_t{t} * V,
                                             (*order[s].second)[pos].get<std::vector<float>>());
        EXPECT_LT(d, kTol) << "seq " << s << " position " << pos;
        worst = std::max(worst, d);
      }
  }
  std::printf("deepseek_v41 chunked+batched: max |logit - reference| = %.2e\n", worst);
}

// The bounded-replay plumbing without its approximation: the long prompt's recent rows are lost
// (overwritten with NaN) and rebuilt by a replay from position 0, which cuts no window; the
// sources' entries and index keys of windows closing before the replay's end are kept as cached,
// not rewritten. The next token's logits are then the reference's.
TEST(DeepseekV41Forward, ReplayFromTheStartRebuildsTheRowsExactly) {
  auto m = open_v41();
  ASSERT_NE(m, nullptr);
  const int64_t V = m->config().vocab_size;
  const model::KvCacheSpec spec = m->kv_cache_spec();
  const nlohmann::json fx = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  const auto& c = fx["cases"][2];
  const auto ids = c["ids"].get<std::vector<int32_t>>();
  const int n = static_cast<int>(ids.size()), block_size = 4, blocks = (n + 3) / 4;
  model::KvCache cache = model::KvCache::allocate(spec, blocks, block_size, blocks);
  ThreadPool pool(2);
  model::ForwardContext ctx{&pool, false};
  PagedSeq s{ids, {}, 0, 0, 0};
  for (int i = 0; i < blocks; ++i) s.blocks.push_back(i);
  ForwardBatch prefill;
  add_step(prefill, s, n - 1, block_size, spec);
  std::vector<float> logits(n * V);
  ASSERT_TRUE(m->forward(prefill, cache, ctx, logits.data()).is_ok());
  for (auto& r : cache.recent) std::fill(r.data(), r.data() + r.size(), NAN);
  s.computed = 0;
  ForwardBatch replay;
  add_step(replay, s, n, block_size, spec);
  replay.seq_replay_start = {0};
  replay.seq_replay_end = {n - 1};
  const Status st = m->forward(replay, cache, ctx, logits.data());
  ASSERT_TRUE(st.is_ok()) << st.message();
  const float d = v4test::max_abs_diff(logits.data() + int64_t{n - 1} * V,
                                       c["logits"][n - 1].get<std::vector<float>>());
  EXPECT_LT(d, kTol);
}

// A step that continues a sequence without the ids before it is refused, not run on a guess.
TEST(DeepseekV41Forward, RefusesAContinuationWithoutItsTokenHistory) {
  auto m = open_v41();
  ASSERT_NE(m, nullptr);
  const model::KvCacheSpec spec = m->kv_cache_spec();
  const int block_size = std::max(4, spec.block_size_multiple);
  model::KvCache cache = model::KvCache::allocate(spec, 8, block_size, 8);
  PagedSeq s{{5, 6, 7, 8, 9, 10}, {0, 1}, 0, 0, 0};
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  std::vector<float> logits(6 * m->config().vocab_size);
  ForwardBatch first;
  add_step(first, s, 4, block_size, spec);
  ASSERT_TRUE(m->forward(first, cache, ctx, logits.data()).is_ok());
  ForwardBatch next;
  v4test::add_step(next, s, 2, block_size, spec.recent_tokens);
  const Status st = m->forward(next, cache, ctx, logits.data());
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("seq_token_history"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace deepinfer
