// Deeper context keys classified from their shallower key's uncertain tokens
// (ContextWalker::classify_below) must give exactly what a scan of the whole vocabulary gives
// for that key (ContextWalker::classify): the same accepted tokens (its own plus the shallower
// key's), the same uncertain tokens in the same order, and the same refine verdict. Checked
// for every key the precompute would visit, down to the deepest frame.
#include <gtest/gtest.h>

#include "deepinfer/structured/masks/context_keys.h"
#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/masks/vocab_trie.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::test_vocabulary;

std::vector<uint32_t> accepted_mask(const TokenClasses& c, size_t words) {
  std::vector<uint32_t> mask(words, 0);
  c.add_accepted(mask.data());
  return mask;
}

struct Counts {
  size_t derived = 0;  // keys classified both ways and compared
  size_t keys = 0;
};

// Walks keys depth first from each byte position, as the precompute does, and compares the
// two classifications wherever the shallower one is complete.
void compare_keys(const std::shared_ptr<const CompiledGrammar>& g, Counts& counts) {
  const Grammar& grammar = g->grammar();
  auto trie = shared_vocab_trie(test_vocabulary());
  const ByteColumns cols = byte_columns(grammar);
  ContextWalker walker(&grammar, trie, cols), scanner(&grammar, trie, cols);
  const std::vector<uint32_t> no_aliases;
  ContextGraph graph(grammar, no_aliases);
  const size_t words = g->vocab().mask_words();
  std::vector<std::pair<ContextKey, std::unique_ptr<TokenClasses>>> todo;
  std::vector<std::unique_ptr<TokenClasses>> kept;  // shallower classifications stay alive
  for (uint32_t p : graph.positions()) {
    ContextKey key{p, StackPool::kNoPos, StackPool::kNoPos, StackPool::kNoPos};
    todo.emplace_back(key, walker.classify(key));
    while (!todo.empty()) {
      auto [k, c] = std::move(todo.back());
      todo.pop_back();
      ++counts.keys;
      const int depth = key_depth(k);
      if (!c->refine || !c->complete()) continue;
      for (uint32_t below : graph.frames_below(k[depth - 1])) {
        ContextKey deeper = k;
        deeper[depth] = below;
        auto derived = walker.classify_below(deeper, *c);
        auto scanned = scanner.classify(deeper);
        SCOPED_TRACE(::testing::Message() << "key " << deeper[0] << "," << deeper[1] << ","
                                          << deeper[2] << "," << deeper[3]);
        ASSERT_TRUE(scanned->complete());  // its uncertain tokens are a subset of c's
        EXPECT_EQ(accepted_mask(*derived, words), accepted_mask(*scanned, words));
        EXPECT_EQ(derived->uncertain, scanned->uncertain);
        EXPECT_EQ(derived->uncertain_lcp, scanned->uncertain_lcp);
        EXPECT_EQ(derived->refine, scanned->refine);
        ++counts.derived;
        todo.emplace_back(deeper, std::move(derived));
      }
      kept.push_back(std::move(c));
    }
  }
}

TEST(ContextDerive, DeeperKeysFromShallowerUncertainTokensEqualFullScans) {
  const std::vector<GrammarSpec> specs = {
      // Strings inside objects inside arrays: a string's end pops several frames.
      {GrammarSpec::kJsonSchema,
       R"({"type":"array","items":{"type":"object","properties":{
            "a":{"type":"string"},"b":{"type":"array","items":{"type":"string","maxLength":8}},
            "c":{"type":"object","properties":{"d":{"type":"integer"},"e":{"type":"string"}}}},
            "required":["a"]}})",
       {}},
      {GrammarSpec::kJsonObject, "", {}},
      {GrammarSpec::kEbnf,
       "root ::= item (\",\" item)*\nitem ::= \"[\" root \"]\" | word\nword ::= [a-z]+ | \"'\" "
       "[a-z ]* \"'\"",
       {}},
  };
  Counts counts;
  for (const auto& spec : specs) {
    SCOPED_TRACE(spec.source);
    auto g = testing::compile_unclassified(spec);
    ASSERT_TRUE(g);
    compare_keys(g, counts);
  }
  // The derivation must actually have been exercised, at more than one depth.
  EXPECT_GT(counts.derived, 20u) << counts.keys << " keys";
}

}  // namespace
}  // namespace deepinfer::structured
