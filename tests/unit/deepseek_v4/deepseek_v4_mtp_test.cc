// DeepSeek-V4's MTP draft head on the fp4_e2m1 fixture (mtp.0: FP8 projections, FP4 experts):
// draft logits for every position against the generator's reference (DeepSeek's MTPBlock built
// from transformers' decoder layer, make_tiny_deepseek_v4.py mtp_logits), in one call and fed
// in chunks and single tokens through the MTP's own paged window state (the window of 6 is
// shorter than the prompts); loading without mtp.* and with a piece missing; misuse errors.
#include "v4_checkpoint_edit.h"

namespace deepinfer {
namespace {

using v4test::PagedSeq;

model::DeepseekV4* as_v4(model::Model* m) { return dynamic_cast<model::DeepseekV4*>(m); }

// Main-model streams for every position of `ids` (one prefill).
std::vector<float> main_streams(model::DeepseekV4& m, const std::vector<int32_t>& ids,
                                ThreadPool& pool) {
  testing::all_position_logits(m, ids, pool);
  return m.final_streams();
}

// Draft logits for positions 0..n-1 (token ids[i + 1] with the streams at i), fed `chunk`
// tokens a call into one MTP cache with scattered blocks.
std::vector<float> draft_logits(model::DeepseekV4& m, const std::vector<int32_t>& ids,
                                const std::vector<float>& streams, int chunk, ThreadPool& pool) {
  const int64_t V = m.config().vocab_size;
  const int64_t row = int64_t{m.v4_config().hc_mult} * m.v4_config().hidden;
  const int n = static_cast<int>(ids.size()) - 1, block_size = 4;
  PagedSeq s{std::vector<int32_t>(ids.begin() + 1, ids.end()), {}, 0};
  const int blocks = (n + block_size - 1) / block_size;
  for (int i = 0; i < blocks; ++i) s.blocks.push_back(2 * blocks - 1 - 2 * i);  // scattered
  model::KvCache cache =
      model::KvCache::allocate(m.mtp_kv_cache_spec(), 2 * blocks, block_size, 2 * blocks);
  model::ForwardContext ctx{&pool, false};
  std::vector<float> out(size_t(n) * V);
  while (s.computed < n) {
    const int first = s.computed, k = std::min(chunk, n - first);
    ForwardBatch b;
    v4test::add_step(b, s, k, block_size);
    Status st = m.mtp_forward(b, streams.data() + first * row, cache, ctx, out.data() + first * V, nullptr);
    EXPECT_TRUE(st.is_ok()) << st.message();
    if (!st.is_ok()) break;
  }
  return out;
}

TEST(DeepseekV4Mtp, DraftLogitsMatchReference) {
  auto owned = v4test::open_fixture("fp4_e2m1");
  ASSERT_NE(owned, nullptr);
  model::DeepseekV4& m = *as_v4(owned.get());
  ASSERT_TRUE(m.has_mtp());
  EXPECT_EQ(m.config().num_nextn_predict_layers, 1);
  const int64_t V = m.config().vocab_size;
  ThreadPool pool(2);
  const auto fx = v4test::expected("fp4_e2m1");
  float worst = 0;
  int compared = 0, argmax_checked = 0;
  for (const auto& c : fx["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::vector<float> streams = main_streams(m, ids, pool);
    const auto margin = c["mtp_margin"].get<std::vector<float>>();
    // One call over all positions, then 3 at a time, then token by token (decode).
    for (int chunk : {1000, 3, 1}) {
      const std::vector<float> got = draft_logits(m, ids, streams, chunk, pool);
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        const auto want = c["mtp_logits"][i].get<std::vector<float>>();
        const float d = v4test::max_abs_diff(got.data() + i * V, want);
        EXPECT_LT(d, v4test::kTol)
            << ids.size() << " tokens, chunk " << chunk << ", position " << i;
        worst = std::max(worst, d);
        ++compared;
        if (margin[i] > 2 * v4test::kTol) {  // a clear winner: the same draft token
          const int64_t best = std::max_element(want.begin(), want.end()) - want.begin();
          EXPECT_EQ(v4test::argmax(got.data() + i * V, V), best) << "position " << i;
          ++argmax_checked;
        }
      }
    }
  }
  EXPECT_EQ(compared, 3 * (4 + 12 + 36));
  EXPECT_GT(argmax_checked, 3 * 45);
  std::printf("fp4_e2m1 mtp: max |logit - reference| = %.2e\n", worst);
}

// The draft head reads the main model's streams: others give other logits (the test above
// cannot pass by ignoring prev_streams).
TEST(DeepseekV4Mtp, DraftDependsOnTheMainStreams) {
  auto owned = v4test::open_fixture("fp4_e2m1");
  ASSERT_NE(owned, nullptr);
  model::DeepseekV4& m = *as_v4(owned.get());
  ThreadPool pool(1);
  const std::vector<int32_t> ids = {5, 17, 42, 99, 3};
  std::vector<float> streams = main_streams(m, ids, pool);
  const std::vector<float> a = draft_logits(m, ids, streams, 8, pool);
  for (float& v : streams) v = -v;
  const std::vector<float> b = draft_logits(m, ids, streams, 8, pool);
  EXPECT_GT(v4test::max_abs_diff(a.data(), b), 0.05f);
}

TEST(DeepseekV4Mtp, CheckpointWithoutMtpLoadsWithoutDraftHead) {
  v4test::Checkpoint c = v4test::read_checkpoint("fp4_e2m1");
  for (auto it = c.header.begin(); it != c.header.end();)
    it = it.key().rfind("mtp.", 0) == 0 ? c.header.erase(it) : std::next(it);
  auto m = v4test::load_checkpoint("no_mtp", c);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  model::DeepseekV4* v4 = as_v4(m->get());
  ASSERT_NE(v4, nullptr);
  EXPECT_FALSE(v4->has_mtp());
  EXPECT_EQ(v4->config().num_nextn_predict_layers, 0);
  model::KvCache cache = model::KvCache::allocate(v4->mtp_kv_cache_spec(), 1, 4, 1);
  ForwardBatch b;
  PagedSeq s{{5}, {0}, 0};
  v4test::add_step(b, s, 1, 4);
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  std::vector<float> streams(2 * 64), logits(128);
  Status st = v4->mtp_forward(b, streams.data(), cache, ctx, logits.data(), nullptr);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("no MTP layer"), std::string::npos) << st.message();
}

TEST(DeepseekV4Mtp, PartialMtpNamesTheMissingTensor) {
  v4test::Checkpoint c = v4test::read_checkpoint("fp4_e2m1");
  c.header.erase("mtp.0.hc_head_base");
  std::string msg = v4test::checkpoint_error("mtp_partial", c);
  EXPECT_NE(msg.find("missing tensor 'mtp.0.hc_head_base'"), std::string::npos) << msg;
  c = v4test::read_checkpoint("fp4_e2m1");
  c.header.erase("mtp.0.ffn.experts.3.w2.scale");
  msg = v4test::checkpoint_error("mtp_partial_expert", c);
  EXPECT_NE(msg.find("missing tensor 'mtp.0.ffn.experts.3.w2.scale'"), std::string::npos) << msg;
}

TEST(DeepseekV4Mtp, CompressedMtpLayerIsRefused) {
  v4test::Checkpoint c = v4test::read_checkpoint("fp4_e2m1");
  c.config.erase("layer_types");
  c.config["compress_ratios"] = {4, 128, 0, 4};  // layers 0-2 as the fixture (HCA rate 8); MTP: 4
  const std::string msg = v4test::checkpoint_error("mtp_csa", c);
  EXPECT_NE(msg.find("compress_ratios[3] = 4"), std::string::npos) << msg;
}

TEST(DeepseekV4Mtp, WrongCacheIsAnError) {
  auto owned = v4test::open_fixture("fp4_e2m1");
  ASSERT_NE(owned, nullptr);
  model::DeepseekV4& m = *as_v4(owned.get());
  model::KvCache cache = model::KvCache::allocate(m.kv_cache_spec(), 2, 8, 2);  // the main one
  ForwardBatch b;
  PagedSeq s{{5, 6}, {0}, 0};
  v4test::add_step(b, s, 2, 8);
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  std::vector<float> streams(2 * 2 * 64), logits(2 * 128);
  Status st = m.mtp_forward(b, streams.data(), cache, ctx, logits.data(), nullptr);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("mtp_kv_cache_spec"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace deepinfer
