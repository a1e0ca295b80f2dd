// PatternDfaMemo: within one compile, dfa_from_pattern answers a pattern it built before with
// the same automaton, keeps search and anchored forms apart, never keeps a failure, and
// leaves the enclosing memo in place when a nested one ends.
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
    auto s = dfa_from_pattern("(gcm)_.*", true);
    auto a = dfa_from_pattern("(gcm)_.*", false);
    ASSERT_TRUE(s.is_ok() && a.is_ok());
    EXPECT_TRUE(same(*s, *fresh_search)) << i;
    EXPECT_TRUE(same(*a, *fresh_anchored)) << i;
  }
}

TEST(PatternDfaMemo, FailuresAreReportedEveryTime) {
  PatternDfaMemo memo;
  auto first = dfa_from_pattern("(ab", true);
  auto second = dfa_from_pattern("(ab", true);
  ASSERT_FALSE(first.is_ok());
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(first.status().message(), second.status().message());
}

TEST(PatternDfaMemo, NestedMemoRestoresTheOuterOne) {
  PatternDfaMemo outer;
  auto before = dfa_from_pattern("^[a-z]{2,4}$", true);
  ASSERT_TRUE(before.is_ok());
  {
    PatternDfaMemo inner;
    auto in_inner = dfa_from_pattern("^[a-z]{2,4}$", true);
    ASSERT_TRUE(in_inner.is_ok());
    EXPECT_TRUE(same(*in_inner, *before));
  }
  auto after = dfa_from_pattern("^[a-z]{2,4}$", true);
  ASSERT_TRUE(after.is_ok());
  EXPECT_TRUE(same(*after, *before));
}

}  // namespace
}  // namespace deepinfer::structured
