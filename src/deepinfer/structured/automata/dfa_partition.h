// The coarsest partition of a complete automaton's states that refines given labels and is
// stable under its transitions (Moore rounds, then Hopcroft's O(k n log n)): the classes
// that minimization merges. Shared by the code-point automata (code_point_dfa_minimize.cc)
// and the remainder automata of multipleOf (json_schema/residues.cc), where Moore's rounds
// of ordered-map signatures dominated compile time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deepinfer::structured {

// next: [n * k] row-major, every target in [0, n); labels: [n] initial classes (any ints).
// Returns [n] block ids, dense from 0, numbered in order of each block's first state.
// A few Moore rounds, then Hopcroft if those have not settled it.
std::vector<int32_t> coarsest_stable_partition(size_t n, size_t k, const std::vector<int32_t>& next,
                                               const std::vector<int32_t>& labels);
// Hopcroft's algorithm alone (the same result; exposed so tests can compare the two).
std::vector<int32_t> hopcroft(size_t n, size_t k, const std::vector<int32_t>& next,
                              const std::vector<int32_t>& labels);

}  // namespace deepinfer::structured
