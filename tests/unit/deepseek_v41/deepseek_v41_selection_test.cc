// V4.1 candidate blocks and top-k against the reference: the index sources' visible scores, the
// candidate source's mask and every index source's picks for the fixture's 37-token prompt
// (expected.json "selections", written by tests/reference/make_tiny_deepseek_v41.py).
#include "deepinfer/model/deepseek_v41_selection.h"

#include <limits>

#include "deepinfer/model/deepseek_v41_config.h"
#include "v41_fixture.h"

namespace deepinfer {
namespace {

std::vector<float> row_of(const nlohmann::json& row) {
  std::vector<float> out;
  for (const nlohmann::json& v : row)
    out.push_back(v.is_null() ? -std::numeric_limits<float>::infinity() : v.get<float>());
  return out;
}

std::vector<int32_t> kept(const std::vector<uint8_t>& mask) {
  std::vector<int32_t> out;
  for (size_t e = 0; e < mask.size(); ++e)
    if (mask[e]) out.push_back(static_cast<int32_t>(e));
  return out;
}

TEST(DeepseekV41Selection, CandidatesAndTopkMatchTheReference) {
  auto cfg = model::deepseek_v41_config_from_json(v41test::fixture_dir() + "/config.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  const nlohmann::json expected = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  const nlohmann::json& sel = expected["cases"].back()["selections"];
  ASSERT_EQ(sel.size(), 3u);                     // index sources 2, 5, 7
  std::vector<std::vector<uint8_t>> candidates;  // the candidate source's mask, per query
  int picks_compared = 0, restricted = 0;
  for (int layer : cfg->index_sources) {
    const model::V41Layer& L = cfg->layers[layer];
    const nlohmann::json& s = sel[std::to_string(layer)];
    const size_t n_queries = s["index_scores"].size();
    if (L.publishes_candidates) candidates.assign(n_queries, {});
    for (size_t t = 0; t < n_queries; ++t) {
      const std::vector<float> scores = row_of(s["index_scores"][t]);
      const int64_t visible = static_cast<int64_t>(t + 1) / L.ratio;
      if (L.publishes_candidates) {
        candidates[t].resize(scores.size());
        model::v41_candidate_blocks(scores, visible, cfg->candidate_topk_blocks,
                                    cfg->candidate_block_size, candidates[t]);
        // The reference keeps whole blocks, the newest one's invisible tail too; only the visible
        // entries can be picked, and those are what the C++ mask holds.
        std::vector<int32_t> want;
        for (int32_t e : s["candidates"][t].get<std::vector<int32_t>>())
          if (e < visible) want.push_back(e);
        EXPECT_EQ(kept(candidates[t]), want) << "layer " << layer << " query " << t;
      }
      std::span<const uint8_t> within;
      if (L.uses_candidates) {
        ASSERT_EQ(candidates.size(), n_queries);
        within = candidates[t];
        restricted += static_cast<int>(kept(candidates[t]).size()) < visible;
      }
      std::vector<int32_t> out(cfg->index_topk);
      const int n = model::v41_select_topk(scores, visible, within, cfg->index_topk, out);
      out.resize(n);
      EXPECT_EQ(out, s["topk"][t].get<std::vector<int32_t>>())
          << "layer " << layer << " query " << t;
      picks_compared += n;
    }
  }
  EXPECT_GT(picks_compared, 100);
  EXPECT_GT(restricted, 10);  // the candidate mask really narrowed layer 7's choice
}

TEST(DeepseekV41Selection, NewestBlockIsPinnedAndInvisibleEntriesNeverPicked) {
  // 10 entries, 7 visible, blocks of 2: blocks {0,1} {2,3} {4,5} {6}; one block kept -> the
  // newest visible entry's block {6}, although entry 0 scores best.
  const std::vector<float> scores = {9, 1, 2, 3, 4, 5, 0, 100, 100, 100};
  std::vector<uint8_t> keep(scores.size());
  model::v41_candidate_blocks(scores, 7, 1, 2, keep);
  EXPECT_EQ(kept(keep), (std::vector<int32_t>{6}));
  model::v41_candidate_blocks(scores, 7, 2, 2, keep);
  EXPECT_EQ(kept(keep), (std::vector<int32_t>{0, 1, 6}));
  std::vector<int32_t> out(3);
  ASSERT_EQ(model::v41_select_topk(scores, 7, {}, 3, out), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 4, 5}));
  ASSERT_EQ(model::v41_select_topk(scores, 7, keep, 3, out), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 1, 6}));
  EXPECT_EQ(model::v41_select_topk(scores, 0, {}, 3, out), 0);
  model::v41_candidate_blocks(scores, 0, 2, 2, keep);
  EXPECT_EQ(kept(keep), std::vector<int32_t>{});
}

}  // namespace
}  // namespace deepinfer
