// Chain keys: deterministic, namespaced, sensitive to every token and to the parent.
#include "deepinfer/kvstore/key.h"

#include <gtest/gtest.h>

namespace deepinfer::kvstore {
namespace {

Namespace ns() {
  Namespace n;
  n.model_id = "org/model";
  n.revision = "abc";
  n.dtype = "bf16";
  n.block_tokens = 4;
  return n;
}

TEST(KvKey, DeterministicAndNamespaced) {
  std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto a = prefix_keys(ns(), toks);
  auto b = prefix_keys(ns(), toks);
  ASSERT_EQ(a.size(), 2u);  // the trailing partial block gets no key
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0], a[1]);
  for (auto mutate : std::vector<void (*)(Namespace&)>{
           [](Namespace& n) { n.model_id = "org/other"; },
           [](Namespace& n) { n.revision = "abd"; },
           [](Namespace& n) { n.kv_layout_version = 2; },
           [](Namespace& n) { n.dtype = "f16"; },
           [](Namespace& n) { n.shard_index = 1; },
           [](Namespace& n) { n.shard_count = 2; }}) {
    Namespace n = ns();
    mutate(n);
    auto c = prefix_keys(n, toks);
    EXPECT_NE(c[0], a[0]);
    EXPECT_NE(c[1], a[1]);
  }
}

TEST(KvKey, ChainDependsOnParentAndEveryToken) {
  std::vector<int32_t> toks = {10, 20, 30, 40, 50, 60, 70, 80};
  auto base = prefix_keys(ns(), toks);
  for (size_t i = 0; i < toks.size(); ++i) {
    auto t = toks;
    t[i] += 1;
    auto k = prefix_keys(ns(), t);
    EXPECT_NE(k[1], base[1]) << "token " << i;
    if (i < 4) EXPECT_NE(k[0], base[0]);
    else EXPECT_EQ(k[0], base[0]);
  }
  // Same second block after a different first block: different key (keys name whole prefixes).
  std::vector<int32_t> other = {11, 20, 30, 40, 50, 60, 70, 80};
  EXPECT_NE(prefix_keys(ns(), other)[1], base[1]);
}

TEST(KvKey, HexRoundTrip) {
  BlockKey k = root_key(ns());
  std::string hex = to_hex(k);
  EXPECT_EQ(hex.size(), 64u);
  BlockKey back{};
  ASSERT_TRUE(from_hex(hex, &back));
  EXPECT_EQ(back, k);
  EXPECT_FALSE(from_hex(hex.substr(1), &back));
  hex[3] = 'g';
  EXPECT_FALSE(from_hex(hex, &back));
}

}  // namespace
}  // namespace deepinfer::kvstore
