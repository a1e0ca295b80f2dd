// The tiny random LLaVA checkpoint (tests/reference/make_tiny_llava.py) against
// transformers' LlavaForConditionalGeneration: the image embeddings (SigLIP tower + projector),
// the logits of prompts with 1 and 3 images, and 8 greedy tokens.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../common/test_model.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/model.h"
#include "deepinfer/vision/image.h"
#include "deepinfer/vision/image_prompt.h"
#include "deepinfer/vision/vision_encoder.h"

namespace deepinfer::vision {
namespace {

// float32 on both sides (bf16 weights widen exactly); only summation order differs. Embeddings
// are O(1), logits O(1..10): differences are ~1e-6 / ~1e-5.
constexpr float kEmbedTol = 1e-4f;
constexpr float kLogitTol = 1e-3f;

std::string fixture(const std::string& rel) { return testing::source_dir() + "/tests/reference/fixtures/" + rel; }

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Loaded {
  std::unique_ptr<model::Model> lm;
  std::unique_ptr<VisionEncoder> vision;
};

Loaded load() {
  const std::string dir = fixture("tiny_llava");
  auto st = format::SafetensorsModel::open(dir);
  EXPECT_TRUE(st.is_ok()) << st.status().message();
  model::WeightSource src{nullptr, *st, dir};
  auto lm = model::load_model(src);
  EXPECT_TRUE(lm.is_ok()) << lm.status().message();
  auto enc = VisionEncoder::load(dir, *st);
  EXPECT_TRUE(enc.is_ok()) << enc.status().message();
  if (!lm.is_ok() || !enc.is_ok()) return {};
  return {std::move(lm).value(), std::move(enc).value()};
}

TEST(Llava, ImageEmbeddingsLogitsAndGreedyTokensMatchTransformers) {
  Loaded m = load();
  ASSERT_TRUE(m.lm && m.vision);
  std::ifstream in(fixture("tiny_llava/expected.json"));
  const nlohmann::json fx = nlohmann::json::parse(in);
  ASSERT_EQ(m.vision->image_token_id(), fx["image_token_id"].get<int>());
  ASSERT_EQ(m.vision->tokens_per_image(), fx["tokens_per_image"].get<int>());
  ThreadPool pool(2);
  model::ForwardContext ctx{&pool, false};
  const int64_t V = m.lm->config().vocab_size, H = m.vision->embedding_size();
  ASSERT_EQ(fx["cases"].size(), 2u);
  for (const auto& c : fx["cases"]) {
    const std::string name = c["name"];
    std::vector<std::vector<float>> embeds;
    for (const auto& file : c["images"]) {
      auto img = decode_image(read_file(fixture("vision/images/" + file.get<std::string>())));
      ASSERT_TRUE(img.is_ok()) << img.status().message();
      auto e = m.vision->encode(preprocess_image(*img, m.vision->processor()), ctx);
      ASSERT_TRUE(e.is_ok()) << e.status().message();
      embeds.push_back(std::move(e).value());
    }
    float worst = 0;
    const auto& ref_emb = c["image0_embeddings"];
    ASSERT_EQ(static_cast<int64_t>(embeds[0].size()), static_cast<int64_t>(ref_emb.size()) * H);
    for (size_t r = 0; r < ref_emb.size(); ++r)
      for (int64_t j = 0; j < H; ++j) worst = std::max(worst, std::fabs(embeds[0][r * H + j] - ref_emb[r][j].get<float>()));
    EXPECT_LT(worst, kEmbedTol) << name << ": image embeddings";
    std::printf("%s: max |embedding - HF| = %.2e\n", name.c_str(), worst);

    // The prompt as transformers saw it: one placeholder per image, expanded by us.
    std::vector<int32_t> ids;
    const int32_t image_id = m.vision->image_token_id();
    const auto expanded_ref = c["prompt_ids"].get<std::vector<int32_t>>();
    for (size_t i = 0; i < expanded_ref.size(); ++i)
      if (expanded_ref[i] != image_id || i == 0 || expanded_ref[i - 1] != image_id) ids.push_back(expanded_ref[i]);
    auto ex = expand_image_placeholders(ids, image_id, m.vision->tokens_per_image(), static_cast<int>(embeds.size()));
    ASSERT_TRUE(ex.is_ok()) << ex.status().message();
    ASSERT_EQ(ex->ids, expanded_ref) << name;
    std::vector<int32_t> rows;
    std::vector<float> flat;
    for (const ImageSpan& s : ex->spans) {
      for (int k = 0; k < s.length; ++k) rows.push_back(s.start + k);
      flat.insert(flat.end(), embeds[s.image].begin(), embeds[s.image].end());
    }
    std::vector<int32_t> seq = ex->ids;
    const std::vector<float> logits = testing::all_position_logits(*m.lm, seq, pool, rows, flat);
    worst = 0;
    for (size_t k = 0; k < c["logits_rows"].size(); ++k) {
      const int row = c["logits_rows"][k];
      for (int64_t t = 0; t < V; ++t)
        worst = std::max(worst, std::fabs(logits[row * V + t] - c["logits"][k][t].get<float>()));
    }
    EXPECT_LT(worst, kLogitTol) << name << ": logits";
    std::printf("%s: max |logit - HF| = %.2e\n", name.c_str(), worst);
    // Greedy: recompute the whole sequence each step (tiny model, 8 steps).
    std::vector<int32_t> greedy;
    for (int step = 0; step < 8; ++step) {
      const std::vector<float> l = testing::all_position_logits(*m.lm, seq, pool, rows, flat);
      const float* last = l.data() + (seq.size() - 1) * V;
      const int32_t tok = static_cast<int32_t>(std::max_element(last, last + V) - last);
      greedy.push_back(tok);
      seq.push_back(tok);
    }
    EXPECT_EQ(greedy, c["greedy"].get<std::vector<int32_t>>()) << name;
  }
}

TEST(Llava, PlaceholderCountMismatchIsAnError) {
  auto r = expand_image_placeholders({1, 5, 5, 2}, 5, 4, 1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("2 image placeholder(s) for 1 image(s)"), std::string::npos);
  auto ok = expand_image_placeholders({1, 5, 2, 5}, 5, 3, 2);
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(ok->ids, (std::vector<int32_t>{1, 5, 5, 5, 2, 5, 5, 5}));
  ASSERT_EQ(ok->spans.size(), 2u);
  EXPECT_EQ(ok->spans[1].start, 5);
}

TEST(Llava, WrongPixelCountIsAnError) {
  Loaded m = load();
  ASSERT_TRUE(m.vision);
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  EXPECT_EQ(m.vision->encode(std::vector<float>(10), ctx).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer::vision
