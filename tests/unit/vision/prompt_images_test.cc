// Image rows through the engine's plain-data path with no model: attach_images checks spans and
// swaps the prompt's image positions for hash-derived ids outside the vocabulary, and the batch
// builder hands each chunk of a chunked prefill exactly its image rows' embeddings.
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "deepinfer/engine/batch_builder.h"
#include "deepinfer/engine/prompt_images.h"
#include "deepinfer/engine/sequence.h"

namespace deepinfer::engine {
namespace {

constexpr int kHidden = 3;

PromptImage image(int start, int length, uint64_t hash, float base) {
  PromptImage img;
  img.start = start;
  img.length = length;
  img.hash = {hash, ~hash};
  auto e = std::make_shared<std::vector<float>>();
  for (int i = 0; i < length * kHidden; ++i) e->push_back(base + static_cast<float>(i));
  img.embeddings = e;
  return img;
}

Sequence seq_of(int n) {
  Sequence s;
  s.id = 1;
  for (int i = 0; i < n; ++i) s.prompt.push_back(7);
  s.block_table = {0, 1, 2, 3};
  return s;
}

TEST(PromptImages, ImagePositionsGetDistinctOutOfVocabularyKeys) {
  Sequence a = seq_of(12), b = seq_of(12);
  ASSERT_TRUE(attach_images({image(2, 4, 11, 0)}, kHidden, a).is_ok());
  ASSERT_TRUE(attach_images({image(2, 4, 12, 0)}, kHidden, b).is_ok());
  for (int p = 0; p < 12; ++p) {
    const bool in_image = p >= 2 && p < 6;
    EXPECT_EQ(a.prompt[p] >= (1 << 30), in_image) << p;
    if (in_image) EXPECT_NE(a.prompt[p], b.prompt[p]) << p;  // another image, other keys
    else EXPECT_EQ(a.prompt[p], 7) << p;
  }
  EXPECT_NE(a.prompt[2], a.prompt[3]);  // positions within one image differ too
}

TEST(PromptImages, BadSpansAreErrors) {
  Sequence s = seq_of(10);
  EXPECT_FALSE(attach_images({image(8, 4, 1, 0)}, kHidden, s).is_ok());                     // past the end
  EXPECT_FALSE(attach_images({image(2, 4, 1, 0), image(4, 2, 2, 0)}, kHidden, s).is_ok());  // overlap
  EXPECT_FALSE(attach_images({image(2, 4, 1, 0)}, kHidden + 1, s).is_ok());                 // wrong width
  EXPECT_EQ(s.images, nullptr);
}

TEST(PromptImages, ChunkedPrefillSplitsAnImageAcrossSteps) {
  Sequence s = seq_of(12);
  ASSERT_TRUE(attach_images({image(3, 5, 9, 100)}, kHidden, s).is_ok());  // positions 3..7
  SequenceLookup lookup = [&](int64_t) { return &s; };
  for (auto [first, n] : {std::pair{0, 5}, std::pair{5, 7}}) {
    ScheduleOutput out;
    out.seqs.push_back({1, n, first, false, {}});
    const BatchInputs b = build_forward_batch(out, lookup, 4);
    std::vector<int32_t> want_rows;
    std::vector<float> want;
    for (int pos = std::max(first, 3); pos < std::min(first + n, 8); ++pos) {
      want_rows.push_back(pos - first);
      for (int j = 0; j < kHidden; ++j) want.push_back(100.0f + static_cast<float>((pos - 3) * kHidden + j));
    }
    EXPECT_EQ(b.batch.embed_rows, want_rows) << "chunk at " << first;
    EXPECT_EQ(b.batch.embeds, want) << "chunk at " << first;
    for (int32_t row : b.batch.embed_rows) EXPECT_EQ(b.batch.token_ids[row], 0);  // an in-vocabulary id
  }
}

}  // namespace
}  // namespace deepinfer::engine
