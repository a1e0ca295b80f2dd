// The context precompute and the masks served while it runs: a grammar used before its
// background precompute has started (every mask one scan of the vocabulary for the whole
// stack set), one whose precompute is driven a little between tokens, one with no precompute
// (every context classified by the first mask that needs it) and one fully precomputed must
// give the same bitmask at every step, and that bitmask must equal accept_token over the
// whole vocabulary.
// Covers the scan shortcuts (a subtree accepted whole when the state loops on its bytes or a
// counted run has copies left for it) on bounded strings, enums, numbers, regex and EBNF.
#include <gtest/gtest.h>

#include <chrono>

#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/masks/vocab_trie.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::greedy_tokenize;
using testing::test_vocabulary;

struct Case {
  GrammarSpec::Kind kind;
  std::string source;
  std::string text;  // a valid output, walked token by token
};

std::vector<Case> cases() {
  return {
      {GrammarSpec::kJsonSchema,
       R"({"type":"object","properties":{"id":{"type":"string","minLength":12,"maxLength":12},
           "name":{"type":"string","maxLength":40},"tags":{"type":"array","items":{"type":"string"},"maxItems":3},
           "n":{"type":"integer","minimum":-5},"kind":{"enum":["alpha","beta",3]}},"required":["id","name"]})",
       R"({"id":"abcdefghijkl","name":"Ada Lovelace, \"the first\" programmer","tags":["x","yy"],"n":42,"kind":"beta"})"},
      {GrammarSpec::kJsonSchema, R"({"type":"string","pattern":"^[a-z]{2,5}-[0-9]+$"})",
       R"("abc-2024")"},
      {GrammarSpec::kJsonObject, "", R"({"a":[1,2.5e3,true,null,{"b":"c d"}],"e":"f"})"},
      {GrammarSpec::kRegex, "(hello|help)[ ]world{1,3}!", "help worldd!"},
      {GrammarSpec::kEbnf,
       "root ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= [0-9]+ | \"(\" expr \")\"",
       "(12+3)+45"},
  };
}

// A precompute budget no machine reaches here (the default 1 s could be, under a sanitizer),
// so "everything precomputed" is a property of the code, not of the machine's speed.
GrammarLimits generous_limits() {
  GrammarLimits limits;
  limits.precompute_seconds = 600;
  return limits;
}

std::shared_ptr<const CompiledGrammar> build(const Case& c, CompiledGrammar::Precompute mode) {
  auto r = compile_grammar({c.kind, c.source, {}}, test_vocabulary(), generous_limits(), mode);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : nullptr;
}

// The tokens the matcher accepts from its current state, one accept_token per token.
std::vector<uint32_t> brute_force_mask(GrammarMatcher& m) {
  const TokenVocabulary& v = m.compiled().vocab();
  std::vector<uint32_t> mask(v.mask_words(), 0);
  for (int32_t id = 0; id < v.size(); ++id)
    if (m.accept_token(id)) {
      mask[id >> 5] |= 1u << (id & 31);
      m.rollback(1);
    }
  return mask;
}

TEST(GrammarBackgroundPrecompute, MasksWhilePendingEqualPrecomputedMasks) {
  size_t ahead_classified = 0, ahead_scanned = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.source);
    auto full = build(c, CompiledGrammar::Precompute::kBeforeReturn);
    auto idle = build(c, CompiledGrammar::Precompute::kInBackground);    // never driven
    auto driven = build(c, CompiledGrammar::Precompute::kInBackground);  // a slice per token
    // No precompute at all: every context is classified by the first mask that needs it.
    GrammarLimits no_budget;
    no_budget.precompute_seconds = 0;
    auto on_demand = compile_grammar({c.kind, c.source, {}}, test_vocabulary(), no_budget);
    ASSERT_TRUE(full && idle && driven && on_demand.is_ok());
    EXPECT_FALSE(full->precompute_pending());
    EXPECT_TRUE(idle->precompute_pending());
    GrammarMatcher a(full), b(idle), d(driven), o(*on_demand);
    const size_t words = full->vocab().mask_words();
    std::vector<uint32_t> ma(words), mb(words), md(words), mo(words);
    std::vector<int32_t> ids = greedy_tokenize(full->vocab(), c.text);
    ids.push_back(full->vocab().eos_ids.at(0));
    for (size_t i = 0; i < ids.size(); ++i) {
      a.fill_next_token_bitmask(ma.data());
      b.fill_next_token_bitmask(mb.data());
      d.fill_next_token_bitmask(md.data());
      o.fill_next_token_bitmask(mo.data());
      ASSERT_EQ(ma, mb) << "mask scanned ahead of the precompute differs before token " << i;
      ASSERT_EQ(ma, mo) << "mask with contexts classified on demand differs before token " << i;
      ASSERT_EQ(ma, md) << "partly precomputed mask differs before token " << i;
      // The whole vocabulary on the first steps (each check is a vocabulary of accepts).
      if (i < 4) {
        ASSERT_EQ(ma, brute_force_mask(a)) << "mask differs from accept_token before token " << i;
      }
      ASSERT_TRUE(a.accept_token(ids[i])) << "token " << i;
      ASSERT_TRUE(b.accept_token(ids[i]));
      ASSERT_TRUE(d.accept_token(ids[i]));
      ASSERT_TRUE(o.accept_token(ids[i]));
      driven->precompute_more(0.0002);
    }
    EXPECT_TRUE(a.is_terminated());
    ahead_classified += idle->context_stats().lazy;
    ahead_scanned += idle->context_stats().direct_masks;
    EXPECT_GT((*on_demand)->context_stats().lazy, 0u);
    EXPECT_EQ((*on_demand)->context_stats().direct_masks, 0u);
    EXPECT_EQ(full->context_stats().lazy, 0u);
  }
  // Both ways a mask runs ahead of the precompute were taken: a few contexts classified, and
  // one scan for a stack set with many missing contexts (an object's optional properties).
  EXPECT_GT(ahead_classified, 0u);
  EXPECT_GT(ahead_scanned, 0u);
}

TEST(GrammarBackgroundPrecompute, FirstMaskIsAnsweredFromTheCache) {
  // A grammar returned for background precompute has its first mask's contexts classified
  // already (the mask a request asks for right after compile returns); kOnFirstUse leaves
  // them to that mask.
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.source);
    auto background = build(c, CompiledGrammar::Precompute::kInBackground);
    auto on_use = build(c, CompiledGrammar::Precompute::kOnFirstUse);
    ASSERT_TRUE(background && on_use);
    EXPECT_TRUE(background->precompute_pending());
    EXPECT_GT(background->context_stats().precomputed, 0u);
    EXPECT_EQ(background->context_stats().lazy, 0u);
    EXPECT_EQ(on_use->context_stats().precomputed, 0u);
    GrammarMatcher b(background), o(on_use);
    std::vector<uint32_t> mb(background->vocab().mask_words()), mo(mb.size());
    b.fill_next_token_bitmask(mb.data());
    o.fill_next_token_bitmask(mo.data());
    EXPECT_EQ(background->context_stats().lazy, 0u);
    EXPECT_EQ(background->context_stats().direct_masks, 0u);
    EXPECT_GT(on_use->context_stats().lazy + on_use->context_stats().direct_masks, 0u);
    EXPECT_EQ(mb, mo);
    EXPECT_EQ(mb, brute_force_mask(b));
  }
}

TEST(GrammarBackgroundPrecompute, ScannedMasksAreKeptPerStackSet) {
  // A stack set that comes back (here the same state asked three times; in decoding, every
  // token inside an unbounded string) is scanned once while the precompute is pending, then
  // its classification is reused.
  Case c{
      GrammarSpec::kJsonSchema,
      R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"integer"},"d":{"type":"boolean"}}})",
      ""};
  auto idle = build(c, CompiledGrammar::Precompute::kInBackground);
  auto full = build(c, CompiledGrammar::Precompute::kBeforeReturn);
  ASSERT_TRUE(idle && full);
  GrammarMatcher a(full), b(idle);
  std::vector<uint32_t> ma(full->vocab().mask_words()), mb(ma.size());
  ASSERT_TRUE(a.accept_bytes("{") && b.accept_bytes("{"));
  for (int i = 0; i < 3; ++i) {
    a.fill_next_token_bitmask(ma.data());
    b.fill_next_token_bitmask(mb.data());
    ASSERT_EQ(ma, mb) << "mask " << i;
  }
  // The object's start holds a stack per optional property: one scan, then two reuses.
  EXPECT_EQ(idle->context_stats().direct_masks, 1u);
  EXPECT_EQ(ma, brute_force_mask(a));
}

TEST(GrammarBackgroundPrecompute, KeySetScansAreSharedAcrossDeeperStacks) {
  // Inside a bounded string each character moves the stacks to the next link of the counted
  // run, so no two masks see the same stacks; their keys (links far from the bound are keyed
  // alike) are the same, and so is the one scan kept for that key set.
  Case c{GrammarSpec::kJsonSchema, R"({"type":"string","maxLength":1000})", ""};
  auto idle = build(c, CompiledGrammar::Precompute::kInBackground);
  ASSERT_TRUE(idle);
  GrammarMatcher m(idle);
  std::vector<uint32_t> mask(idle->vocab().mask_words());
  ASSERT_TRUE(m.accept_bytes("\"a"));
  for (int i = 0; i < 6; ++i) {
    m.fill_next_token_bitmask(mask.data());
    if (i == 0 || i == 5) {
      EXPECT_EQ(mask, brute_force_mask(m)) << "mask " << i;
    }
    ASSERT_TRUE(m.accept_bytes("b"));
  }
  EXPECT_EQ(idle->context_stats().direct_masks, 1u);
}

// Walks `body` byte by byte on a fully precomputed grammar and on one whose contexts are
// classified on demand; before each offset in `check_at`, both masks must equal accept_token
// over the whole vocabulary. Returns the precomputed grammar's matcher, past `body`.
std::unique_ptr<GrammarMatcher> walk_comparing(const std::string& schema, const std::string& body,
                                               const std::vector<size_t>& check_at) {
  Case c{GrammarSpec::kJsonSchema, schema, ""};
  auto full = build(c, CompiledGrammar::Precompute::kBeforeReturn);
  auto idle = build(c, CompiledGrammar::Precompute::kInBackground);
  if (!full || !idle) return nullptr;
  auto a = std::make_unique<GrammarMatcher>(full);
  GrammarMatcher b(idle);
  std::vector<uint32_t> ma(full->vocab().mask_words()), mb(ma.size());
  size_t done = 0;
  for (size_t pos : check_at) {
    EXPECT_TRUE(a->accept_bytes(body.substr(done, pos - done)) &&
                b.accept_bytes(body.substr(done, pos - done)));
    done = pos;
    a->fill_next_token_bitmask(ma.data());
    b.fill_next_token_bitmask(mb.data());
    EXPECT_EQ(ma, mb) << "at byte " << pos;
    EXPECT_EQ(ma, brute_force_mask(*a)) << "at byte " << pos;
  }
  EXPECT_TRUE(a->accept_bytes(body.substr(done)));
  return a;
}

TEST(GrammarBackgroundPrecompute, BoundedStringDeepIntoItsRun) {
  // The last copies of a counted run reject tokens longer than what is left: check every
  // token at several points along a 30-character string.
  std::string body = "\"";
  for (int i = 0; i < 30; ++i) body += static_cast<char>('a' + i % 26);
  auto m = walk_comparing(R"({"type":"string","minLength":30,"maxLength":30})", body,
                          {0, 1, 20, 27, 30});
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->accept_bytes("\""));
  EXPECT_TRUE(m->can_terminate());
}

TEST(GrammarBackgroundPrecompute, VeryLongCountedRun) {
  // 5,000 copies (the largest bound accepted): run lengths are computed to a bounded depth
  // (no deep recursion), and lengths stay exact.
  std::string body = "\"" + std::string(4995, 'x');
  auto m =
      walk_comparing(R"({"type":"string","minLength":4990,"maxLength":5000})", body, {1, 4990});
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->accept_bytes(std::string(6, 'x')));  // 5,001 characters
  EXPECT_TRUE(m->accept_bytes("\""));
  EXPECT_TRUE(m->can_terminate());
}

TEST(GrammarBackgroundPrecompute, BoundedStringsSkipSubtreesWhenTheGrammarSplitsPlainBytes) {
  // A grammar that tells digits from letters (an integer anywhere) puts the plain bytes in
  // several byte columns; a bounded string's contexts must still accept whole trie subtrees
  // that fit its copies left, instead of visiting every node. Measured in trie nodes visited,
  // which do not depend on the machine's speed.
  Case alone{GrammarSpec::kJsonSchema, R"({"type":"string","maxLength":200})", ""};
  Case with_integer{GrammarSpec::kJsonSchema,
                    R"({"anyOf":[{"type":"string","maxLength":200},{"type":"integer"}]})", ""};
  auto a = build(alone, CompiledGrammar::Precompute::kBeforeReturn);
  auto b = build(with_integer, CompiledGrammar::Precompute::kBeforeReturn);
  ASSERT_TRUE(a && b);
  const ContextStats sa = a->context_stats(), sb = b->context_stats();
  ASSERT_TRUE(sa.complete && sb.complete);
  bool real = false;
  const size_t trie_nodes = shared_vocab_trie(test_vocabulary(&real))->num_nodes();
  // Calibrated on the real vocabulary (the synthetic one's trie is too small to tell).
  if (real) {
    // Without whole-subtree acceptance each of the string's contexts scans most of the trie
    // (measured: 12,000 nodes per context with SmolLM2's 100,000-node trie; 1,100 with it).
    EXPECT_LT(sa.nodes_visited, sa.precomputed * trie_nodes / 20);
    // The integer's own contexts cost a few scans of the trie at most.
    EXPECT_LT(sb.nodes_visited, sa.nodes_visited + 4 * trie_nodes);
  }
  // And the masks are still exact along the string.
  std::string body = "\"" + std::string(190, 'y') + "12";
  auto m = walk_comparing(with_integer.source, body, {0, 1, 150, 185, 192});
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->accept_bytes("\""));
  EXPECT_TRUE(m->can_terminate());
}

TEST(GrammarBackgroundPrecompute, BoundedStringEndsAcceptShortPlainTokensAtOnce) {
  // Near the end of a bounded string the plain tokens that fit are accepted by one bitmask
  // (VocabTrie::short_plain) and longer ones rejected, instead of walking every trie node on
  // a plain path as deep as the copies left. Measured in trie nodes visited.
  Case c{GrammarSpec::kJsonSchema,
         R"({"type":"object","properties":{"id":{"type":"string","minLength":24,"maxLength":24},
              "tag":{"type":"string","maxLength":16}},"required":["id","tag"]})",
         ""};
  auto g = build(c, CompiledGrammar::Precompute::kBeforeReturn);
  ASSERT_TRUE(g);
  const ContextStats st = g->context_stats();
  ASSERT_TRUE(st.complete);
  bool real = false;
  const size_t trie_nodes = shared_vocab_trie(test_vocabulary(&real))->num_nodes();
  // Calibrated on the real vocabulary: 1,120,000 nodes without the bitmask (11 trie sizes),
  // 294,000 with it, for 1,142 contexts.
  if (real) {
    EXPECT_LT(st.nodes_visited, 6 * trie_nodes);
  }
  auto m = walk_comparing(
      c.source, R"({"id":")" + std::string(24, 'k') + R"(","tag":")" + std::string(16, 'q'),
      {7, 20, 28, 30, 31, 32, 40, 45, 48});
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->accept_bytes("\"}"));
  EXPECT_TRUE(m->can_terminate());
}

TEST(GrammarBackgroundPrecompute, CompilerHandsOutGrammarsBeforeThePrecompute) {
  // The future is ready once the grammar is built; the compiler's background thread then
  // classifies every context; destroying the compiler mid-precompute returns promptly.
  using Clock = std::chrono::steady_clock;
  GrammarSpec spec{GrammarSpec::kJsonSchema,
                   R"({"type":"object","properties":{"a":{"type":"string","maxLength":200},
                       "b":{"type":"string","minLength":64,"maxLength":64}},"required":["a","b"]})",
                   {}};
  std::shared_ptr<const CompiledGrammar> g;
  {
    GrammarCompiler compiler(test_vocabulary(), 1, generous_limits());
    auto r = compiler.compile_async(spec).get();
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    g = *r;
    // A request decoding while the background thread classifies the same grammar: masks
    // agree with accept_token at every token (contexts classified on both sides, shared).
    bool mismatch = false;
    EXPECT_TRUE(testing::walk_text(g, R"({"a":"hello there","b":")" + std::string(64, 'q') + "\"}",
                                   &mismatch));
    EXPECT_FALSE(mismatch);
    const auto deadline = Clock::now() + std::chrono::seconds(300);
    while (g->precompute_pending() && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ContextStats st = g->context_stats();
    EXPECT_FALSE(st.pending);
    EXPECT_TRUE(st.complete);
    EXPECT_GT(st.precomputed, 0u);
  }
  GrammarSpec other = spec;
  other.source[other.source.find("200")] = '3';  // a new grammar, not the cached one
  auto t0 = Clock::now();
  {
    GrammarCompiler compiler(test_vocabulary(), 1);
    ASSERT_TRUE(compiler.compile_async(other).get().is_ok());
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
}

}  // namespace
}  // namespace deepinfer::structured
