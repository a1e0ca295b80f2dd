// The scan grammar (loop_long_chains): long counted runs become loops for the vocabulary
// scans, short ones and required runs of a body that can match nothing stay as they are. That
// the loop classifies every context as the real chain does is checked token by token in
// context_classify_test.cc.
#include "deepinfer/structured/masks/scan_grammar.h"

#include <gtest/gtest.h>

#include "deepinfer/structured/ebnf_parser.h"
#include "deepinfer/structured/stack_pool.h"

namespace deepinfer::structured {
namespace {

Grammar ebnf(const std::string& source) {
  auto g = compile_ebnf(source, {});
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? std::move(g).value() : Grammar{};
}

// Whether `text` is a prefix of some sentence of g (every stack set stays non-empty).
bool viable(const Grammar& g, const std::string& text) {
  StackPool pool(&g);
  std::vector<uint32_t> cur = pool.initial(g.root), next;
  for (char c : text) {
    pool.advance(cur, static_cast<uint8_t>(c), next);
    if (next.empty()) return false;
    cur.swap(next);
  }
  return true;
}

TEST(ScanGrammar, ShortChainsStayAsTheyAre) {
  const Grammar g = ebnf("root ::= \"<\" [a-z]{0,11} \">\"");
  EXPECT_EQ(loop_long_chains(g, 10), nullptr);  // 11 links: not more than max_len + 1
}

TEST(ScanGrammar, LongOptionalRunLoopsAtLinkA) {
  const Grammar g = ebnf("root ::= \"<\" [a-z]{0,40} \">\"");
  ASSERT_EQ(g.counted_chains.size(), 1u);
  const auto& chain = g.counted_chains[0];
  auto scan = loop_long_chains(g, 10);
  ASSERT_NE(scan, nullptr);
  ASSERT_EQ(scan->elements.size(), g.elements.size());  // positions unchanged
  // Link A = 11 calls itself; nothing calls a link above it any more.
  const uint32_t a = chain[11];
  bool self_call = false;
  for (uint32_t p = scan->rule_alts[a][0]; scan->elements[p].kind != ElemKind::kEndAlt; ++p)
    self_call |= scan->elements[p].kind == ElemKind::kRule && scan->elements[p].arg == a;
  EXPECT_TRUE(self_call);
  for (const Element& e : scan->elements) {
    if (e.kind != ElemKind::kRule) continue;
    for (size_t i = 12; i < chain.size(); ++i) EXPECT_NE(e.arg, chain[i]);
  }
  // Within max_len bytes nothing tells them apart; past 41 letters only the real one dies.
  for (const std::string& text : {std::string("<abc>"), std::string("<") + std::string(9, 'a'),
                                  std::string("<>"), std::string("<a>b")})
    EXPECT_EQ(viable(*scan, text), viable(g, text)) << text;
  const std::string long_run = "<" + std::string(41, 'a');
  EXPECT_FALSE(viable(g, long_run));
  EXPECT_TRUE(viable(*scan, long_run));
}

TEST(ScanGrammar, RequiredRunLoopsOnlyWhenItsBodyConsumesBytes) {
  // 30 required letters: the loop never ends within a token, nor does the real run.
  auto scan = loop_long_chains(ebnf("root ::= [a-z]{30} \">\""), 10);
  ASSERT_NE(scan, nullptr);
  EXPECT_FALSE(viable(*scan, "abc>"));
  // 30 required copies of an optional letter can all match nothing: the real run may end at
  // once, a loop never could, so it is left alone.
  const Grammar nullable = ebnf("root ::= (\"a\"?){30} \">\"");
  EXPECT_TRUE(viable(nullable, ">"));
  EXPECT_EQ(loop_long_chains(nullable, 10), nullptr);
}

}  // namespace
}  // namespace deepinfer::structured
