#include "deepinfer/engine/stop_checker.h"

#include <gtest/gtest.h>

namespace deepinfer::engine {
namespace {

std::string feed(StopChecker& c, const std::vector<std::string>& chunks, bool* matched) {
  std::string out;
  for (const auto& ch : chunks) {
    c.push(ch);
    out += c.release(c.matched());
    if (c.matched()) break;
  }
  if (!c.matched()) out += c.release(true);
  *matched = c.matched();
  return out;
}

TEST(StopChecker, StopsBeforeTheStopStringAcrossChunks) {
  StopChecker c({"STOP"});
  bool matched;
  EXPECT_EQ(feed(c, {"hello S", "TO", "P world"}, &matched), "hello ");
  EXPECT_TRUE(matched);
}

TEST(StopChecker, HoldsBackOnlyPossiblePrefixes) {
  StopChecker c({"\n\n"});
  c.push("abc\n");
  EXPECT_EQ(c.release(false), "abc");  // "\n" may start a stop string
  c.push("d");
  EXPECT_EQ(c.release(false), "\nd");
  EXPECT_FALSE(c.matched());
}

TEST(StopChecker, EarliestOfSeveralStops) {
  StopChecker c({"world", "lo"});
  bool matched;
  EXPECT_EQ(feed(c, {"hello world"}, &matched), "hel");
  EXPECT_TRUE(matched);
}

TEST(StopChecker, NoStopsPassesEverything) {
  StopChecker c;
  bool matched;
  EXPECT_EQ(feed(c, {"a", "b", "c"}, &matched), "abc");
  EXPECT_FALSE(matched);
}

TEST(StopChecker, TextAfterMatchIgnored) {
  StopChecker c({"x"});
  c.push("axb");
  c.push("more");
  EXPECT_EQ(c.release(true), "a");
}

}  // namespace
}  // namespace deepinfer::engine
