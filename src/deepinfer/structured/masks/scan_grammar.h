// The grammar the vocabulary scans step: the compiled grammar with each long counted
// repetition turned into a loop. Within one token (at most max_len bytes) a counted run with
// more than max_len copies left cannot be used up, so it accepts exactly what a loop does;
// scanning the loop gives one DFA state where the real chain gives one per byte (a string
// with a maxLength of 512 walked through a non-plain token's plain prefix, say). Matching
// and the run-time checks still use the real grammar.
#pragma once

#include <memory>

#include "deepinfer/structured/grammar_ir.h"

namespace deepinfer::structured {

// For every counted chain with more than max_len + 1 links (Grammar::counted_chains; link i
// has i copies left): calls of links above link A = max_len + 1 call link A instead, and link
// A's body calls link A again instead of link A - 1. Element positions are unchanged, so a
// context key (whose positions CompiledGrammar aliases to link A) names the same frames in
// both. A chain of required copies whose body can match the empty string stays as it is (its
// loop could never end, while the real chain can). Null when no chain is long enough.
std::unique_ptr<Grammar> loop_long_chains(const Grammar& g, size_t max_len);

}  // namespace deepinfer::structured
