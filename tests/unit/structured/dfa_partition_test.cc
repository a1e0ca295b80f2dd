// coarsest_stable_partition and hopcroft (dfa_partition.h) against a plain Moore refinement
// (rounds of signatures until the block count stops growing) on random complete automata:
// the same partition up to renaming, which the dense first-state numbering makes equality.
#include "deepinfer/structured/automata/dfa_partition.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace deepinfer::structured {
namespace {

std::vector<int32_t> reference_moore(size_t n, size_t k, const std::vector<int32_t>& next,
                                     const std::vector<int32_t>& labels) {
  std::vector<int32_t> block = labels;
  size_t blocks = 0;
  while (true) {
    std::map<std::vector<int32_t>, int32_t> ids;
    std::vector<int32_t> refined(n);
    for (size_t q = 0; q < n; ++q) {
      std::vector<int32_t> sig = {block[q]};
      for (size_t a = 0; a < k; ++a) sig.push_back(block[next[q * k + a]]);
      refined[q] = ids.try_emplace(sig, static_cast<int32_t>(ids.size())).first->second;
    }
    block = std::move(refined);
    if (ids.size() == blocks) return block;
    blocks = ids.size();
  }
}

TEST(DfaPartition, MatchesMooreOnRandomAutomata) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    size_t n = 1 + rng() % 300, k = 1 + rng() % 6;
    int num_labels = 1 + static_cast<int>(rng() % 3);
    std::vector<int32_t> next(n * k), labels(n);
    bool chain = trial % 4 == 0;  // long chains: many Moore rounds, so Hopcroft takes over
    for (size_t q = 0; q < n; ++q) {
      labels[q] = static_cast<int32_t>(rng() % num_labels) * 3 - 1;
      for (size_t a = 0; a < k; ++a)
        next[q * k + a] = chain ? static_cast<int32_t>(std::min(q + 1 + a % 2, n - 1))
                                : static_cast<int32_t>(rng() % n);
    }
    if (chain)
      for (size_t q = 0; q < n; ++q) labels[q] = q + 1 == n || rng() % 5 == 0;
    std::vector<int32_t> want = reference_moore(n, k, next, labels);
    ASSERT_EQ(coarsest_stable_partition(n, k, next, labels), want) << "trial " << trial;
    ASSERT_EQ(hopcroft(n, k, next, labels), want) << "trial " << trial;
  }
}

// Remainder automata r -> 10 r + d mod L with factors 2 and 5 in L: many states share their
// successors, so the row merging before the Moore rounds is exercised.
TEST(DfaPartition, MatchesMooreOnRemainderAutomata) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    size_t n = (1 + rng() % 40) * (trial % 3 == 0 ? 8 : trial % 3 == 1 ? 50 : 4);
    std::vector<int32_t> next(n * 10), labels(n);
    for (size_t r = 0; r < n; ++r) {
      labels[r] = rng() % 7 == 0;
      for (size_t d = 0; d < 10; ++d) next[r * 10 + d] = static_cast<int32_t>((10 * r + d) % n);
    }
    ASSERT_EQ(coarsest_stable_partition(n, 10, next, labels), reference_moore(n, 10, next, labels))
        << "L = " << n;
  }
}

TEST(DfaPartition, ResidueAutomatonOfMultiplesOfSeven) {
  // r -> 10 r + d mod 14, valid = multiple of 7: minimal automaton is mod 7 (the factor 2
  // is forgotten after one digit, yet "the last digit is even" is not part of validity).
  const size_t n = 14;
  std::vector<int32_t> next(n * 10), labels(n);
  for (size_t r = 0; r < n; ++r) {
    labels[r] = r % 7 == 0;
    for (size_t d = 0; d < 10; ++d) next[r * 10 + d] = static_cast<int32_t>((10 * r + d) % n);
  }
  std::vector<int32_t> part = coarsest_stable_partition(n, 10, next, labels);
  for (size_t r = 0; r < n; ++r) EXPECT_EQ(part[r], part[r % 7]) << r;
  EXPECT_EQ(*std::max_element(part.begin(), part.end()), 6);
}

}  // namespace
}  // namespace deepinfer::structured
