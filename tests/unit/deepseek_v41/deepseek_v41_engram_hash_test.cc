// Engram hashing against the reference (tests/reference/deepseek_v41_reference.py wrote every
// position's table rows into expected.json), the same rows from only the last max_ngram ids (as
// decode derives them from the token history), and broken sidecars refused naming the field.
#include "deepinfer/model/deepseek_v41_engram_hash.h"

#include "v41_fixture.h"

namespace deepinfer {
namespace {

using model::EngramHashLayout;
using v41test::EditedCopy;
using v41test::no_edit;

EngramHashLayout fixture_layout() {
  auto c = model::deepseek_v41_config_from_json(v41test::fixture_dir() + "/config.json");
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  auto l = model::engram_hash_layout(*c, v41test::fixture_dir() + "/engram_hash.json");
  EXPECT_TRUE(l.is_ok()) << l.status().message();
  return *l;
}

TEST(DeepseekV41Engram, RowsMatchTheReference) {
  const EngramHashLayout layout = fixture_layout();
  ASSERT_EQ(layout.layers.size(), 2u);
  EXPECT_EQ(layout.n_cols, 6);
  const nlohmann::json expected = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  int compared = 0;
  for (const nlohmann::json& c : expected["cases"]) {
    const std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
    for (const model::EngramLayerHash& layer : layout.layers) {
      std::vector<int64_t> rows(ids.size() * layout.n_cols);
      model::engram_rows_for_sequence(layout, layer, ids, rows);
      const auto& want = c["engram_rows"][std::to_string(layer.layer)];
      for (size_t t = 0; t < ids.size(); ++t)
        for (int col = 0; col < layout.n_cols; ++col, ++compared) {
          ASSERT_EQ(rows[t * layout.n_cols + col], want[t][col].get<int64_t>())
              << "layer " << layer.layer << " position " << t << " column " << col;
          ASSERT_LT(rows[t * layout.n_cols + col], layer.table_rows);
        }
    }
  }
  EXPECT_GT(compared, 300);
}

TEST(DeepseekV41Engram, LastIdsAreEnough) {
  const EngramHashLayout layout = fixture_layout();
  const std::vector<int32_t> ids = {9, 8, 7, 100, 3, 3, 3, 99, 120, 64, 66, 31};
  for (const model::EngramLayerHash& layer : layout.layers) {
    std::vector<int64_t> full(ids.size() * layout.n_cols), one(layout.n_cols);
    model::engram_rows_for_sequence(layout, layer, ids, full);
    for (size_t t = 0; t < ids.size(); ++t) {
      const size_t first = t >= 3 ? t - 3 : 0;
      model::engram_rows_at(layout, layer,
                            std::span<const int32_t>(ids).subspan(first, t + 1 - first), one);
      for (int col = 0; col < layout.n_cols; ++col)
        EXPECT_EQ(one[col], full[t * layout.n_cols + col]) << t;
    }
  }
}

TEST(DeepseekV41Engram, NormalizedIdsShareRows) {
  // The fixture's token map folds even ids >= 64 onto id - 32 (68 shares 36's normalized id).
  const EngramHashLayout layout = fixture_layout();
  ASSERT_EQ(layout.token_map[68], layout.token_map[36]);
  ASSERT_NE(layout.token_map[69], layout.token_map[37]);
  std::vector<int64_t> a(layout.n_cols), b(layout.n_cols);
  const int32_t x[] = {5, 68, 7}, y[] = {5, 36, 7}, z[] = {5, 69, 7};
  model::engram_rows_at(layout, layout.layers[0], x, a);
  model::engram_rows_at(layout, layout.layers[0], y, b);
  EXPECT_EQ(a, b);
  model::engram_rows_at(layout, layout.layers[0], z, b);
  EXPECT_NE(a, b);
}

std::string sidecar_error(const std::string& tag, void (*edit)(nlohmann::json&)) {
  EditedCopy d(tag, no_edit, edit);
  auto c = model::deepseek_v41_config_from_json(d.config());
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  auto l = model::engram_hash_layout(*c, d.hash());
  EXPECT_FALSE(l.is_ok()) << tag;
  if (l.is_ok()) return "";
  EXPECT_NE(l.status().message().find(d.hash()), std::string::npos) << l.status().message();
  return l.status().message();
}

TEST(DeepseekV41Engram, BrokenSidecarsAreRefused) {
  EXPECT_NE(sidecar_error("missing", [](nlohmann::json& h) { h = nullptr; }).find("cannot open"),
            std::string::npos);
  EXPECT_NE(sidecar_error("short_map", [](nlohmann::json& h) { h["token_map"].erase(0); })
                .find("token_map"),
            std::string::npos);
  EXPECT_NE(
      sidecar_error("even", [](nlohmann::json& h) { h["multipliers"]["1"][0] = "4"; }).find("odd"),
      std::string::npos);
  EXPECT_NE(sidecar_error(
                "huge", [](nlohmann::json& h) { h["multipliers"]["4"][1] = "9223372036854775807"; })
                .find("at most"),
            std::string::npos);
  EXPECT_NE(sidecar_error("layer", [](nlohmann::json& h) { h["multipliers"].erase("4"); })
                .find("multipliers[\"4\"]"),
            std::string::npos);
  EXPECT_NE(sidecar_error("pad", [](nlohmann::json& h) { h["pad_id"] = 7; }).find("pad_id"),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer
