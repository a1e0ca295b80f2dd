// Prefix caching through images, with no model: a block's key covers the content hash and span
// of every image it holds (image_block_keys.h), so the same image at the same place is reused
// block for block, another image of the same size at the same place is not, and text-only keys
// are what they were before images existed (stored KV stays valid).
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "deepinfer/engine/block_hash.h"
#include "deepinfer/engine/image_block_keys.h"
#include "deepinfer/engine/kv_cache_manager.h"
#include "deepinfer/engine/prompt_images.h"
#include "deepinfer/kvstore/key.h"
#include "engine_test_util.h"

namespace deepinfer::engine {
namespace {
using testing::iota_tokens;
using testing::kv_config;
using testing::make_seq;

constexpr int kBlock = 4;

PromptImage image(int start, int length, uint64_t hash) {
  PromptImage img;
  img.start = start;
  img.length = length;
  img.hash = {hash, hash * 3 + 1};
  img.embeddings = std::make_shared<const std::vector<float>>(static_cast<size_t>(length), 0.5f);
  return img;
}

// 24 prompt tokens; images given as (start, length, hash).
Sequence seq_with(int64_t id, std::vector<PromptImage> images, int n = 24) {
  Sequence s = make_seq(id, iota_tokens(n));
  if (!images.empty()) {
    EXPECT_TRUE(attach_images(images, 1, s).is_ok());
  }
  return s;
}

// Caches `a`'s whole prompt, then returns how many tokens `b` would reuse.
int reused_tokens(Sequence a, Sequence b) {
  KvCacheManager kv(kv_config(16, kBlock));
  EXPECT_TRUE(kv.allocate_slots(a, a.num_prompt_tokens()).has_value());
  a.num_computed_tokens = a.num_prompt_tokens();
  kv.cache_full_blocks(a);
  const int hit = kv.get_computed_blocks(b).num_tokens(kBlock);
  kv.free(a);
  kv.check_invariants({});
  return hit;
}

TEST(ImagePrefixCache, TheSameImageAtTheSamePlaceIsReusedThroughTheImage) {
  // Image over positions 6..13 (blocks 1..3); the hit runs to the last full block before the
  // final token, past the image.
  EXPECT_EQ(reused_tokens(seq_with(1, {image(6, 8, 42)}), seq_with(2, {image(6, 8, 42)})), 20);
}

TEST(ImagePrefixCache, AnotherImageOfTheSameSizeStopsTheHitAtItsFirstBlock) {
  // Same placeholder count and position, other content: only block 0 (positions 0..3) is shared.
  EXPECT_EQ(reused_tokens(seq_with(1, {image(6, 8, 42)}), seq_with(2, {image(6, 8, 43)})), 4);
  // Even when the out-of-vocabulary ids of the two images were equal, the keys differ.
  Sequence a = seq_with(1, {image(6, 8, 42)}), b = seq_with(2, {image(6, 8, 43)});
  b.prompt = a.prompt;  // what a 30-bit collision of every image position would look like
  EXPECT_EQ(reused_tokens(a, b), 4);
}

TEST(ImagePrefixCache, TheSameImageElsewhereOrOfAnotherLengthIsNotReusedPastIt) {
  Sequence a = seq_with(1, {image(6, 8, 42)});
  Sequence moved = seq_with(2, {image(5, 8, 42)});
  moved.prompt = a.prompt;  // identical token ids, only the span differs
  EXPECT_EQ(reused_tokens(a, moved), 4);
}

TEST(ImagePrefixCache, TextBlocksKeepTheirKeysAndOnlyImageBlocksGetExtraWords) {
  const Sequence s = seq_with(1, {image(6, 8, 42), image(16, 2, 7)});
  EXPECT_TRUE(image_block_extra(s, 0, kBlock).empty());
  EXPECT_EQ(image_block_extra(s, 4, kBlock).size(), 3u);   // positions 4..7: the first image
  EXPECT_EQ(image_block_extra(s, 12, kBlock).size(), 3u);  // 12..15: its last two positions
  EXPECT_EQ(image_block_extra(s, 12, 8).size(), 6u);       // 12..19: both images
  EXPECT_TRUE(image_block_extra(s, 20, kBlock).empty());
  const std::vector<uint64_t> e = image_block_extra(s, 16, kBlock);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0], 7u);
  EXPECT_EQ(e[1], 22u);
  EXPECT_EQ(e[2], (uint64_t{16} << 32) | 2u);

  const std::vector<int32_t> t = iota_tokens(kBlock);
  const BlockHash root = root_block_hash("m");
  EXPECT_EQ(chain_block_hash(root, t, {}), chain_block_hash(root, t));
  EXPECT_NE(chain_block_hash(root, t, e), chain_block_hash(root, t));
  const kvstore::BlockKey kroot{};
  EXPECT_NE(kvstore::chain_key(kroot, t, e), kvstore::chain_key(kroot, t));
  std::vector<uint64_t> other = e;
  other[0] ^= 1;
  EXPECT_NE(kvstore::chain_key(kroot, t, e), kvstore::chain_key(kroot, t, other));
  EXPECT_NE(chain_block_hash(root, t, e), chain_block_hash(root, t, other));
}

TEST(ImagePrefixCache, ATextPrefixIsSharedBetweenATextPromptAndAnImagePrompt) {
  EXPECT_EQ(reused_tokens(seq_with(1, {}), seq_with(2, {image(10, 8, 42)})), 8);
}

}  // namespace
}  // namespace deepinfer::engine
