// DeepSeek-V4.1's decoder-side saving on the tiny fixture (8 layers, window 4, KV sources 2 and 5:
// tail layers 6-7): the tail layers run over a prompt's last window only (counted), the paged
// state and the rows of the layers before the tail are bitwise those of the full computation,
// chunked prefill with the saving is bitwise the whole prefill with it wherever the chunks cut,
// and no seq_tail_from (or -1) is bitwise today's forward. The layout rule over several layouts.
#include <cstring>

#include "../deepseek_v4/v4_fixture.h"
#include "deepinfer/model/deepseek_v41.h"
#include "deepinfer/model/deepseek_v41_state.h"
#include "v41_fixture.h"

namespace deepinfer {
namespace {

using v4test::PagedSeq;

// A config with only the roles the rule reads: `owners` own a compressor.
model::DeepseekV41Config layout(int layers, std::vector<int> owners) {
  model::DeepseekV41Config c;
  c.num_layers = layers;
  c.sliding_window = 128;
  c.layers.resize(layers);
  for (int l : owners) {
    c.layers[l].owns_compressor = true;
    c.layers[l].ratio = 1;
  }
  return c;
}

TEST(DeepseekV41Saving, TailLayersFollowTheLastCompressorOwner) {
  // V4.1-Flash: sources 2, 8, 14, 20 (index sources 24..36 own none: they read 20's keys).
  model::DeepseekV41Config flash = layout(40, {2, 8, 14, 20});
  for (int l : {24, 28, 32, 36}) flash.layers[l].runs_indexer = true;
  EXPECT_EQ(model::v41_first_tail_layer(flash), 21);
  EXPECT_EQ(model::v41_kv_cache_spec(flash).saving_window, 128);
  // The last layer owns a compressor: no tail.
  const model::DeepseekV41Config last = layout(6, {1, 5});
  EXPECT_EQ(model::v41_first_tail_layer(last), 6);
  EXPECT_EQ(model::v41_kv_cache_spec(last).saving_window, 0);
  // No compressor at all: every layer's only state is its window.
  EXPECT_EQ(model::v41_first_tail_layer(layout(3, {})), 0);
  // A window-only layer before an owner does not count.
  EXPECT_EQ(model::v41_first_tail_layer(layout(5, {3})), 4);
  // The fixture's own config.
  auto c = model::deepseek_v41_config_from_json(v41test::fixture_dir() + "/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(model::v41_first_tail_layer(*c), 6);
  EXPECT_EQ(model::v41_kv_cache_spec(*c).saving_window, c->sliding_window);
}

struct Prefill {
  std::vector<float> logits;  // the last token's
  int64_t layer_tokens = 0;   // of this prefill
  std::vector<std::vector<float>> block_state, recent;
};

// Prefills `ids` in chunks of `chunk` (batch-invariant kernels, so the chunking cannot move the
// rounding), every chunk carrying `tail_from` (empty: no seq_tail_from at all); logits of the
// last token only.
Prefill prefill(model::DeepseekV41& m, const std::vector<int32_t>& ids, int chunk,
            std::vector<int32_t> tail_from) {
  const model::KvCacheSpec spec = m.kv_cache_spec();
  const int block_size = 4, n = static_cast<int>(ids.size()), blocks = (n + 3) / 4;
  model::KvCache cache = model::KvCache::allocate(spec, blocks, block_size, blocks);
  for (auto& r : cache.recent) std::fill(r.data(), r.data() + r.size(), 0.0f);
  for (auto& r : cache.block_state) std::fill(r.data(), r.data() + r.size(), 0.0f);
  ThreadPool pool(2);
  model::ForwardContext ctx{&pool, true};
  PagedSeq s{ids, {}, 0, 0, 0};
  for (int i = 0; i < blocks; ++i) s.blocks.push_back(i);
  const int64_t V = m.config().vocab_size, before = m.layer_tokens();
  Prefill r;
  while (s.computed < n) {
    ForwardBatch b;
    const int first = s.computed, k = std::min(chunk, n - first);
    v4test::add_step(b, s, k, block_size, spec.recent_tokens);
    for (int pos = first - spec.token_history; pos < first; ++pos)
      b.seq_token_history.push_back(pos < 0 ? -1 : ids[pos]);
    b.logits_rows.clear();
    if (s.computed == n) b.logits_rows.push_back(b.num_tokens() - 1);
    b.seq_tail_from = tail_from;
    r.logits.resize(b.logits_rows.size() * V);
    const Status st = m.forward(b, cache, ctx, r.logits.data());
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
  r.layer_tokens = m.layer_tokens() - before;
  for (auto& x : cache.block_state) r.block_state.emplace_back(x.data(), x.data() + x.size());
  for (auto& x : cache.recent) r.recent.emplace_back(x.data(), x.data() + x.size());
  return r;
}

model::DeepseekV41* open_v41(std::unique_ptr<model::Model>& holder) {
  auto m = v4test::open_dir(v41test::fixture_dir());
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return nullptr;
  holder = std::move(m).value();
  return dynamic_cast<model::DeepseekV41*>(holder.get());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

// The recent rows of layer l at positions [from, to) (block_size 4, slab = block).
bool same_rows(const Prefill& a, const Prefill& b, int l, int64_t floats, int from, int to) {
  for (int p = from; p < to; ++p)
    if (std::memcmp(a.recent[l].data() + p * floats, b.recent[l].data() + p * floats,
                    sizeof(float) * floats) != 0)
      return false;
  return true;
}

TEST(DeepseekV41Saving, TailLayersRunOverTheLastWindowOnly) {
  std::unique_ptr<model::Model> holder;
  model::DeepseekV41* m = open_v41(holder);
  ASSERT_NE(m, nullptr);
  const model::DeepseekV41Config& c = m->v41_config();
  ASSERT_EQ(m->first_tail_layer(), 6);
  const nlohmann::json fx = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  const auto ids = fx["cases"][2]["ids"].get<std::vector<int32_t>>();
  const int n = static_cast<int>(ids.size()), L = c.num_layers, W = c.sliding_window;
  const int from = n - W;
  const Prefill full = prefill(*m, ids, n, {});
  const Prefill none = prefill(*m, ids, n, {-1});
  const Prefill saving = prefill(*m, ids, n, {from});
  EXPECT_EQ(full.layer_tokens, int64_t{n} * L);
  EXPECT_EQ(saving.layer_tokens, int64_t{n} * 6 + int64_t{W} * (L - 6))
      << "the tail layers did not skip the tokens before the prompt's last window";
  // -1: today's forward, bitwise.
  EXPECT_TRUE(same_bits(none.logits, full.logits));
  // The paged state (the sources' entries and index keys) and the rows of every layer before
  // the tail are those of the full computation, bitwise; the tail layers' rows from the cut on
  // are written.
  for (int l = 0; l < L; ++l) {
    EXPECT_TRUE(same_bits(saving.block_state[l], full.block_state[l])) << "layer " << l;
    const int64_t floats = model::v41_state_layout(c, l, 4).recent_floats;
    if (l < 6) {
      EXPECT_TRUE(same_rows(saving, full, l, floats, 0, n)) << "layer " << l;
    } else {
      for (int p = 0; p < from; ++p)  // never computed: still the zeros the cache started with
        EXPECT_EQ(saving.recent[l][p * floats], 0.0f) << "layer " << l << " position " << p;
      EXPECT_NE(saving.recent[l][int64_t{from} * floats], 0.0f) << "layer " << l;
    }
  }
  // An approximation, not a different model: the last token's logits stay close.
  const float d = v4test::max_abs_diff(saving.logits.data(), full.logits);
  std::printf("deepseek_v41 saving: %d of %d tail-layer tokens, max |logit - full| = %.2e\n", W, n,
              d);
  EXPECT_GT(d, 0.0f) << "the cut at the window start changed nothing";
  EXPECT_LT(d, 0.5f);
}

TEST(DeepseekV41Saving, ChunkedPrefillIsBitwiseTheWholePrefill) {
  std::unique_ptr<model::Model> holder;
  model::DeepseekV41* m = open_v41(holder);
  ASSERT_NE(m, nullptr);
  const nlohmann::json fx = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  const auto ids = fx["cases"][2]["ids"].get<std::vector<int32_t>>();
  const int n = static_cast<int>(ids.size()), W = m->v41_config().sliding_window;
  // Cuts at 32, 33 (the prompt's last window starts at 33), 34, ... with these chunk sizes: the
  // boundary at a chunk's start (1, 3), inside one (2, 5, 7, 16), and a chunk wholly before it.
  for (int from : {n - W, n - W - 3}) {
    const Prefill whole = prefill(*m, ids, n, {from});
    for (int chunk : {1, 2, 3, 5, 7, 11, 16}) {
      const Prefill chunked = prefill(*m, ids, chunk, {from});
      EXPECT_TRUE(same_bits(chunked.logits, whole.logits)) << "chunks of " << chunk;
      EXPECT_EQ(chunked.layer_tokens, whole.layer_tokens) << "chunks of " << chunk;
      for (size_t l = 0; l < whole.block_state.size(); ++l) {
        EXPECT_TRUE(same_bits(chunked.block_state[l], whole.block_state[l]))
            << "chunks of " << chunk << ", layer " << l;
        EXPECT_TRUE(same_bits(chunked.recent[l], whole.recent[l]))
            << "chunks of " << chunk << ", layer " << l;
      }
    }
  }
}

TEST(DeepseekV41Saving, RefusesLogitsBeforeTheTail) {
  std::unique_ptr<model::Model> holder;
  model::DeepseekV41* m = open_v41(holder);
  ASSERT_NE(m, nullptr);
  const model::KvCacheSpec spec = m->kv_cache_spec();
  model::KvCache cache = model::KvCache::allocate(spec, 4, 4, 4);
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  PagedSeq s{{5, 6, 7, 8, 9, 10, 11, 12}, {0, 1, 2, 3}, 0, 0, 0};
  ForwardBatch b;
  v4test::add_step(b, s, 8, 4, spec.recent_tokens);  // logits at every position
  b.seq_tail_from = {4};
  std::vector<float> logits(8 * m->config().vocab_size);
  const Status st = m->forward(b, cache, ctx, logits.data());
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("seq_tail_from"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace deepinfer
