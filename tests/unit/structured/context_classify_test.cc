// A context's classification by the vocabulary-trie scan (ContextWalker::classify, with its
// shortcuts: subtrees accepted whole, all plain tokens at once, plain tokens up to a run's
// end at once, first bytes that lead nowhere skipped) must equal a token-by-token reference:
// each token's bytes pushed through the key's stacks one at a time. Accepted = some stack
// survives the whole token; uncertain = every stack died, after some stack could pop below
// the key's known frames on the way; rejected = the rest. Checked for every key the precompute
// would visit, down to the deepest frame, on grammars chosen for those shortcuts.
#include <gtest/gtest.h>

#include <algorithm>

#include "deepinfer/structured/masks/context_keys.h"
#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/masks/vocab_trie.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::test_vocabulary;

struct Reference {
  std::vector<uint32_t> accepted;  // bitmask
  std::vector<int32_t> uncertain;  // sorted ids
};

// Tokens in byte order, so each reuses the stack sets of the prefix it shares with the last.
Reference reference_classes(const Grammar& g, const VocabTrie& trie, const ContextKey& key) {
  StackPool pool(&g);
  uint32_t top = StackPool::kContext;
  for (int i = key_depth(key) - 1; i >= 0; --i)
    top = key[i] == kStackEnd ? StackPool::kAccept : pool.node(top, key[i]);
  const auto& bytes = trie.vocab->token_bytes;
  Reference ref;
  ref.accepted.assign(trie.vocab->mask_words(), 0);
  auto has_context = [](const std::vector<uint32_t>& set) {
    return std::find(set.begin(), set.end(), StackPool::kContext) != set.end();
  };
  std::vector<std::vector<uint32_t>> sets = {{top}};  // sets[j]: after j bytes of `last`
  std::vector<uint8_t> escaped = {has_context(sets[0])};
  std::string last;
  for (int32_t id : trie.tokens) {
    const std::string& t = bytes[id];
    size_t j = 0;
    while (j < last.size() && j < t.size() && j + 1 < sets.size() && last[j] == t[j]) ++j;
    sets.resize(j + 1);
    escaped.resize(j + 1);
    for (; j < t.size() && !sets[j].empty(); ++j) {
      std::vector<uint32_t> next;
      pool.advance(sets[j], static_cast<uint8_t>(t[j]), next);
      escaped.push_back(escaped[j] | has_context(next));
      sets.push_back(std::move(next));
    }
    last = t;
    // sets.back() is after j bytes: the whole token, or the byte where every stack died.
    if (!sets.back().empty() && j == t.size()) {
      ref.accepted[id >> 5] |= 1u << (id & 31);
    } else if (escaped[escaped.size() - 2]) {  // some stack could pop before the fatal byte
      ref.uncertain.push_back(id);
    }
  }
  std::sort(ref.uncertain.begin(), ref.uncertain.end());
  return ref;
}

// The classification's accepted and uncertain sets equal the reference's.
void expect_reference(const TokenClasses& c, const Reference& ref) {
  std::vector<uint32_t> accepted(ref.accepted.size(), 0);
  c.add_accepted(accepted.data());
  EXPECT_EQ(accepted, ref.accepted);
  std::vector<int32_t> uncertain = c.uncertain;
  std::sort(uncertain.begin(), uncertain.end());
  EXPECT_EQ(uncertain, ref.uncertain);
  std::vector<int32_t> listed = c.accepted_ids;  // each token once (a list is not a set)
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(std::adjacent_find(listed.begin(), listed.end()), listed.end());
}

struct Counts {
  size_t keys = 0;       // keys compared
  size_t uncertain = 0;  // keys with uncertain tokens among them
};

// The walker steps the scan grammar (long counted runs looped, see scan_grammar.h); the
// reference pushes tokens through the real one. Keys use the positions the precompute keys
// (links past the longest token alias to one).
void compare_keys(const std::shared_ptr<const CompiledGrammar>& g, Counts& counts) {
  const Grammar& grammar = g->grammar();
  auto trie = shared_vocab_trie(test_vocabulary());
  const ByteColumns cols = byte_columns(grammar);
  ContextWalker walker(&g->scan_grammar(), trie, cols);
  const std::vector<uint32_t> no_aliases;
  ContextGraph graph(grammar, no_aliases);
  std::vector<ContextKey> todo;
  for (uint32_t p : graph.positions()) {
    if (g->key_pos(p) != p) continue;
    todo.push_back({p, StackPool::kNoPos, StackPool::kNoPos, StackPool::kNoPos});
    while (!todo.empty()) {
      const ContextKey key = todo.back();
      todo.pop_back();
      const auto scanned = walker.classify(key);
      const Reference ref = reference_classes(grammar, *trie, key);
      SCOPED_TRACE(::testing::Message()
                   << "key " << key[0] << "," << key[1] << "," << key[2] << "," << key[3]);
      const bool can_refine = !key_is_final(key);
      // Uncertain tokens come in byte order: deeper keys and the run-time checks reuse the
      // states of the prefix each shares with the one before.
      const auto& tb = trie->vocab->token_bytes;
      EXPECT_TRUE(std::is_sorted(scanned->uncertain.begin(), scanned->uncertain.end(),
                                 [&](int32_t a, int32_t b) { return tb[a] < tb[b]; }));
      if (scanned->complete()) {
        expect_reference(*scanned, ref);
        EXPECT_EQ(scanned->refine, can_refine && ref.uncertain.size() > kRefineUncertain);
      } else {  // stopped early: only when so many are uncertain that a deeper key is due
        EXPECT_TRUE(can_refine && scanned->refine);
        EXPECT_GT(ref.uncertain.size(), kMaxUncertainToDerive);
      }
      if (key_depth(key) == 1) {
        // The same key alone as a key set (a mask ahead of the precompute): never refined, so
        // every uncertain token is listed, even where the refinable scan stops early.
        const auto as_set = walker.classify_set({key});
        ASSERT_TRUE(as_set->complete());
        expect_reference(*as_set, ref);
      }
      ++counts.keys;
      counts.uncertain += !ref.uncertain.empty();
      if (!scanned->refine) continue;
      const int depth = key_depth(key);
      for (uint32_t below : graph.frames_below(key[depth - 1])) {
        if (below != kStackEnd && g->key_pos(below) != below) continue;
        ContextKey deeper = key;
        deeper[depth] = below;
        todo.push_back(deeper);
      }
    }
  }
}

void compare_specs(const std::vector<GrammarSpec>& specs, Counts& counts) {
  for (const auto& spec : specs) {
    SCOPED_TRACE(spec.source);
    auto g = testing::compile_unclassified(spec);
    ASSERT_TRUE(g);
    compare_keys(g, counts);
  }
}

TEST(ContextClassify, ScansEqualTokenByTokenReference) {
  const std::vector<GrammarSpec> specs = {
      // Bounded strings in an object: near a string's end its key (one frame) may pop below
      // (the string can end there) and the deeper key cannot; an exact length; a short one.
      {GrammarSpec::kJsonSchema,
       R"({"type":"object","properties":{"a":{"type":"string","minLength":3,"maxLength":12},
            "b":{"type":"string","maxLength":4},"c":{"type":"string","minLength":6,"maxLength":6}},
            "required":["a"]})",
       {}},
      // A string language that splits the plain bytes (no plain run), and one long enough
      // that its early copies accept every plain token.
      {GrammarSpec::kJsonSchema, R"({"type":"string","pattern":"^[a-z]{2,5}-[0-9]+$"})", {}},
      {GrammarSpec::kJsonSchema,
       R"({"type":"array","items":{"anyOf":[{"type":"string"},{"type":"integer"}]},"maxItems":3})",
       {}},
      {GrammarSpec::kEbnf, "root ::= \"<\" [a-z]{1,3} \">\" | \"'\" [ -~]{0,5} \"'\"", {}},
  };
  Counts counts;
  compare_specs(specs, counts);
  EXPECT_GT(counts.keys, 100u);
  EXPECT_GT(counts.uncertain, 10u) << counts.keys << " keys";
}

TEST(ContextClassify, LoopedLongRunsEqualTokenByTokenReference) {
  // Counted runs longer than the longest token, scanned as loops: optional copies of a byte
  // class and required ones (with a loop after); a string body of any character (text tokens
  // at once) and one of printable ASCII only (no text token survives it).
  const std::vector<GrammarSpec> specs = {
      // SmolLM2's longest token is a newline and 80 spaces: a loop at a link with fewer
      // copies left than that (80, say) would accept it where the real run ends first.
      {GrammarSpec::kEbnf, "root ::= \"<\" [\\n -~]{0,100} \">\" | \"'\" [a-z]{90,} \"'\"", {}},
      {GrammarSpec::kJsonSchema,
       R"({"type":"array","items":[{"type":"string"},{"type":"string","pattern":"^[ -~]*$"}]})",
       {}},
  };
  Counts counts;
  compare_specs(specs, counts);
  EXPECT_GT(counts.keys, 50u);
}

TEST(ContextClassify, ClosedRunsEqualTokenByTokenReference) {
  // States whose stacks take every plain (and text) byte for ever, between them, though the
  // bytes part ways (closed_runs.h): property names that must differ from the declared ones
  // (which share prefixes), and a quoted run where only the letters lead into a closed rule,
  // so the state is not closed however many of its stacks are.
  const std::vector<GrammarSpec> specs = {
      {GrammarSpec::kJsonSchema,
       R"({"type":"object","properties":{"first":{"type":"string"},"fit":{"type":"integer"},
            "a":{"type":"boolean"}},"additionalProperties":{"type":"string"}})",
       {}},
      {GrammarSpec::kEbnf, "root ::= \"'\" ([a-z] rest | [0-9] \"x\")\nrest ::= [ -~] rest | \"'\"",
       {}},
      // A search pattern: `.*` loops over a character rule beside words that part ways with
      // them; and a rule that never ends on printable bytes, pushing a frame for each.
      {GrammarSpec::kJsonSchema, R"({"type":"string","pattern":"(ab\\.c)|('.*')+$"})", {}},
      {GrammarSpec::kEbnf, "root ::= \"<\" nest \">\"\nnest ::= [ -~] nest \"x\" | \"|\"", {}},
  };
  Counts counts;
  compare_specs(specs, counts);
  EXPECT_GT(counts.keys, 20u);
}

TEST(ContextClassify, ClassRunsEqualTokenByTokenReference) {
  // Runs of one byte class (class_run_table.h): counted, with a separator after them (a
  // uuid-like pattern, where the run ends inside the key or below it), counted with optional
  // copies (the run ends where the copies become optional), loops, digits (tokens of one
  // byte each in most vocabularies), and a run that ends on a quote (a non-plain byte).
  const std::vector<GrammarSpec> specs = {
      {GrammarSpec::kJsonSchema,
       R"({"type":"object","properties":{"id":{"type":"string",
            "pattern":"^[0-9A-Za-z]{8}-[0-9A-Za-z]{4}-[0-9a-f]{12}$"}},"required":["id"]})",
       {}},
      {GrammarSpec::kJsonSchema, R"({"type":"string","pattern":"^[a-z0-9]{10}$"})", {}},
      // Any character after the run: tokens that go on past it with a multi-byte character
      // are not plain (the non-plain trie's), though their first bytes are the run's.
      {GrammarSpec::kJsonSchema, R"({"type":"string","pattern":"^[a-z]{3}.*$"})", {}},
      {GrammarSpec::kJsonSchema, R"({"type":"string","pattern":"^[A-Z]{2,5}[0-9]{2}x+$"})", {}},
      {GrammarSpec::kJsonSchema, R"({"type":"string","pattern":"^\\d{3}-\\d{4}$"})", {}},
      {GrammarSpec::kEbnf, "root ::= [a-f0-9]+ \":\" [a-z]{3,} | \"<\" [A-Za-z]{6} \">\"", {}},
      // A run that returns to a caller the key does not know: what goes on past it is
      // uncertain, plain or not.
      {GrammarSpec::kEbnf, "root ::= \"<\" word \">\" | \"(\" word \")\"\nword ::= [a-z]{3}", {}},
  };
  Counts counts;
  compare_specs(specs, counts);
  EXPECT_GT(counts.keys, 50u);
  EXPECT_GT(counts.uncertain, 5u) << counts.keys << " keys";
}

TEST(ContextClassify, TextTokens) {
  EXPECT_TRUE(is_text_token("caf\xc3\xa9"));           // a whole two-byte character
  EXPECT_TRUE(is_text_token(" \xe2\x80"));              // cut inside a three-byte one
  EXPECT_TRUE(is_text_token("\xf0\x9f\x98\x80!"));     // four bytes, then plain
  EXPECT_FALSE(is_text_token("plain"));                 // no multi-byte character
  EXPECT_FALSE(is_text_token("\x80" "abc"));            // starts inside a character
  EXPECT_FALSE(is_text_token("\xc3\xa9\""));            // a quote
  EXPECT_FALSE(is_text_token("\xc3\xa9\n"));            // a control character
  EXPECT_FALSE(is_text_token("\xc0\xaf"));              // overlong
  EXPECT_FALSE(is_text_token("\xed\xa0\x80"));          // a surrogate
  EXPECT_FALSE(is_text_token("\xf4\x90\x80\x80"));      // past U+10FFFF
  EXPECT_FALSE(is_text_token("\xc3" "a"));              // a character cut by a plain byte
}

TEST(ContextClassify, ShortPlainTokensByLengthMatchTheVocabulary) {
  auto vocab = test_vocabulary();
  auto trie = shared_vocab_trie(vocab);
  ASSERT_GT(trie->max_short_plain, 0u);
  auto plain = [&](const std::string& t) {
    for (unsigned char c : t)
      if (!((trie->plain[c >> 6] >> (c & 63)) & 1)) return false;
    return true;
  };
  for (size_t len : {size_t{1}, size_t{2}, size_t{5}, trie->max_short_plain}) {
    std::vector<uint32_t> want(vocab->mask_words(), 0);
    uint32_t count = 0;
    for (int32_t id : trie->tokens) {
      const std::string& t = vocab->token_bytes[id];
      if (t.size() <= len && plain(t)) {
        want[id >> 5] |= 1u << (id & 31);
        ++count;
      }
    }
    SCOPED_TRACE(len);
    EXPECT_EQ(std::vector<uint32_t>(trie->short_plain(len), trie->short_plain(len) + want.size()),
              want);
    EXPECT_EQ(trie->num_short_plain[len], count);
  }
}

}  // namespace
}  // namespace deepinfer::structured
