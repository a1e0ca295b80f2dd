// A class's run table (class_run_table.h) against the vocabulary itself: the tokens made of
// the class's bytes alone, by length, and the trie nodes where longer tokens leave a run of
// them, found by looking at every token's bytes.
#include "deepinfer/structured/masks/class_run_table.h"

#include <gtest/gtest.h>

#include <string>

#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::test_vocabulary;

ByteSet class_of(const std::string& bytes) {
  ByteSet c;
  for (unsigned char b : bytes) c.set(b);
  return c;
}

ByteSet range(char lo, char hi) {
  ByteSet c;
  c.set_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
  return c;
}

void expect_matches_vocabulary(const VocabTrie& trie, const ByteSet& c) {
  const ClassRunTable table = build_class_run_table(trie, c);
  const auto& bytes = trie.vocab->token_bytes;
  auto in_class = [&](const std::string& t, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (!table.bytes.test(static_cast<uint8_t>(t[i]))) return false;
    return true;
  };
  // The longest run of class bytes any token starts with.
  size_t longest = 0;
  for (int32_t id : trie.tokens) {
    const std::string& t = bytes[id];
    size_t n = 0;
    while (n < t.size() && table.bytes.test(static_cast<uint8_t>(t[n]))) ++n;
    longest = std::max(longest, n);
  }
  ASSERT_EQ(table.max_depth, longest);
  for (size_t len = 1; len <= table.max_depth; ++len) {
    std::vector<uint32_t> want(trie.vocab->mask_words(), 0);
    uint32_t count = 0;
    for (int32_t id : trie.tokens) {
      const std::string& t = bytes[id];
      if (t.size() <= len && in_class(t, t.size())) {
        want[id >> 5] |= 1u << (id & 31);
        ++count;
      }
    }
    SCOPED_TRACE(len);
    EXPECT_EQ(std::vector<uint32_t>(table.up_to(len), table.up_to(len) + want.size()), want);
    ASSERT_EQ(table.num_up_to[len], count);
    // The list by length: its first `count` are those tokens.
    std::vector<uint32_t> listed(want.size(), 0);
    for (uint32_t i = 0; i < count; ++i)
      listed[table.by_length[i] >> 5] |= 1u << (table.by_length[i] & 31);
    EXPECT_EQ(listed, want);
    // Frontier nodes: at depth len, on a path of class bytes, with a token below them that is
    // longer; and every such token lies below one of them.
    size_t below_frontier = 0;
    for (uint32_t k : table.frontier[len]) {
      EXPECT_EQ(trie.depth[k], len);
      EXPECT_GT(trie.end[k], k + 1);
      below_frontier += trie.tok_begin[trie.end[k]] - trie.tok_begin[k + 1];
    }
    size_t longer = 0;
    for (int32_t id : trie.tokens) longer += bytes[id].size() > len && in_class(bytes[id], len);
    EXPECT_EQ(below_frontier, longer);
  }
  EXPECT_EQ(table.by_length.size(), table.max_depth ? table.num_up_to[table.max_depth] : 0);
}

TEST(ClassRunTable, MatchesTheVocabulary) {
  auto trie = shared_vocab_trie(test_vocabulary());
  ByteSet alnum = range('0', '9');
  for (int b = 'a'; b <= 'z'; ++b) alnum.set(static_cast<uint8_t>(b));
  for (int b = 'A'; b <= 'Z'; ++b) alnum.set(static_cast<uint8_t>(b));
  for (const ByteSet& c : {range('0', '9'), range('a', 'f'), range('a', 'z'), alnum,
                           class_of(" \n\t"), class_of("xyz")}) {
    SCOPED_TRACE(c.count());
    expect_matches_vocabulary(*trie, c);
  }
}

TEST(ClassRunTable, KeepsOnlyPlainBytesAndIsSharedPerClass) {
  auto trie = shared_vocab_trie(test_vocabulary());
  ByteSet letters = range('a', 'z');
  ByteSet with_quote = letters;
  with_quote.set('"');  // not plain: a run of the class cannot hold it
  const ClassRunTable table = build_class_run_table(*trie, with_quote);
  EXPECT_EQ(table.bytes, letters);
  auto a = shared_class_run_table(trie, letters);
  auto b = shared_class_run_table(trie, with_quote);
  ASSERT_TRUE(a);
  EXPECT_EQ(a, b);  // the same plain bytes: one table
  EXPECT_NE(a, shared_class_run_table(trie, range('a', 'y')));
}

TEST(ClassRunTable, RunsTooLongForTheMemoryBoundGetNoTable) {
  // 70,000 tokens (2,188 mask words) and one of 1,000 letters: a bitmask per length would
  // take 8.75 MB.
  auto vocab = std::make_shared<TokenVocabulary>();
  for (int i = 0; i < 70000; ++i) vocab->token_bytes.push_back("t" + std::to_string(i));
  vocab->token_bytes.push_back(std::string(1000, 'a'));
  vocab->token_bytes.push_back("aaa");
  vocab->eos_ids = {0};
  auto trie = shared_vocab_trie(vocab);
  EXPECT_EQ(build_class_run_table(*trie, range('a', 'z')).max_depth, 0u);
  EXPECT_EQ(build_class_run_table(*trie, class_of("t0123456789")).max_depth, 6u);  // "t69999"
}

TEST(ClassRunTable, EmptyClassHasNoRun) {
  auto trie = shared_vocab_trie(test_vocabulary());
  const ClassRunTable table = build_class_run_table(*trie, class_of("\"\\"));
  EXPECT_EQ(table.max_depth, 0u);
  EXPECT_TRUE(table.bytes.empty());
}

}  // namespace
}  // namespace deepinfer::structured
