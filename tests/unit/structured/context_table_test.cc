// ContextTable: finds what was inserted under the exact key, keeps the first classification
// of a key (a later duplicate is dropped), and hands out pointers that survive its growth.
#include "deepinfer/structured/masks/context_table.h"

#include <gtest/gtest.h>

namespace deepinfer::structured {
namespace {

ContextKey key(uint32_t a, uint32_t b = StackPool::kNoPos) {
  return {a, b, StackPool::kNoPos, StackPool::kNoPos};
}

std::unique_ptr<TokenClasses> classes_with(int32_t id) {
  auto c = std::make_unique<TokenClasses>();
  c->accepted_ids.push_back(id);
  return c;
}

TEST(ContextTable, FindsInsertedKeysAndKeepsTheFirst) {
  ContextTable t;
  EXPECT_EQ(t.find(key(1)), nullptr);
  auto [first, inserted] = t.insert(key(1), classes_with(10));
  ASSERT_TRUE(inserted);
  auto [again, inserted_again] = t.insert(key(1), classes_with(11));
  EXPECT_FALSE(inserted_again);
  EXPECT_EQ(again, first);
  EXPECT_EQ(t.find(key(1))->accepted_ids, std::vector<int32_t>{10});
  // Keys differing only in a deeper frame are different keys.
  EXPECT_EQ(t.find(key(1, 7)), nullptr);
  t.insert(key(1, 7), classes_with(12));
  EXPECT_EQ(t.find(key(1, 7))->accepted_ids, std::vector<int32_t>{12});
  EXPECT_EQ(t.size(), 2u);
}

TEST(ContextTable, PointersSurviveGrowth) {
  ContextTable t;
  std::vector<const TokenClasses*> kept;
  for (uint32_t i = 0; i < 5000; ++i)
    kept.push_back(t.insert(key(i, i * 3), classes_with(i)).first);
  ASSERT_EQ(t.size(), 5000u);
  for (uint32_t i = 0; i < 5000; ++i) {
    ASSERT_EQ(t.find(key(i, i * 3)), kept[i]) << i;
    ASSERT_EQ(kept[i]->accepted_ids, std::vector<int32_t>{static_cast<int32_t>(i)});
    ASSERT_EQ(t.find(key(i, i * 3 + 1)), nullptr) << i;
  }
}

}  // namespace
}  // namespace deepinfer::structured
