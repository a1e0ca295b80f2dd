// PatternDfaMemo: dfa_from_pattern given a memo answers a pattern it built before with the
// same automaton, keeps search and anchored forms apart, never keeps a failure, and a memo
// holds only what was built through it (it is passed explicitly, not found on the thread).
#include <gtest/gtest.h>

#include "deepinfer/structured/automata/code_point_dfa.h"

namespace deepinfer::structured {
namespace {

bool same(const CodePointDfa& a, const CodePointDfa& b) {
  return a.atoms == b.atoms && a.next == b.next && a.accept == b.accept;
}

TEST(PatternDfaMemo, AnswersRepeatsWithTheSameAutomaton) {
  auto fresh_search = dfa_from_pattern("(gcm)_.*", true);
  auto fresh_anchored = dfa_from_pattern("(gcm)_.*", false);
  ASSERT_TRUE(fresh_search.is_ok() && fresh_anchored.is_ok());
  ASSERT_FALSE(same(*fresh_search, *fresh_anchored));  // "xgcm_" matches only when searching
  PatternDfaMemo memo;
  for (int i = 0; i < 3; ++i) {
    auto s = dfa_from_pattern("(gcm)_.*", true, &memo);
    auto a = dfa_from_pattern("(gcm)_.*", false, &memo);
    ASSERT_TRUE(s.is_ok() && a.is_ok());
    EXPECT_TRUE(same(*s, *fresh_search)) << i;
    EXPECT_TRUE(same(*a, *fresh_anchored)) << i;
    EXPECT_EQ(memo.size(), 2u) << i;  // one entry per (pattern, search), built once
  }
}

TEST(PatternDfaMemo, FailuresAreReportedEveryTime) {
  PatternDfaMemo memo;
  auto first = dfa_from_pattern("(ab", true, &memo);
  auto second = dfa_from_pattern("(ab", true, &memo);
  ASSERT_FALSE(first.is_ok());
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(first.status().message(), second.status().message());
  EXPECT_EQ(memo.size(), 0u);
}

TEST(PatternDfaMemo, MemosAreIndependent) {
  PatternDfaMemo one, two;
  auto a = dfa_from_pattern("^[a-z]{2,4}$", true, &one);
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(one.size(), 1u);
  EXPECT_EQ(two.size(), 0u);  // nothing shared through the thread
  auto without = dfa_from_pattern("^[a-z]{2,4}$", true);
  ASSERT_TRUE(without.is_ok());
  EXPECT_EQ(one.size(), 1u);
  auto b = dfa_from_pattern("^[a-z]{2,4}$", true, &two);
  ASSERT_TRUE(b.is_ok());
  EXPECT_TRUE(same(*a, *b));
  EXPECT_TRUE(same(*a, *without));
  EXPECT_EQ(two.size(), 1u);
}

}  // namespace
}  // namespace deepinfer::structured
