// Grammar positions from which a stack takes any run of bytes of a set, whatever lies below
// it: the byte taken there leads into a rule that takes every byte of the set again, the same
// way, and never has to end first. The case that matters is a property name that must differ
// from the declared ones (json_schema_parts.cc's key_excluding: a trie of rules, one per
// prefix, each falling back to a loop over string bytes). A context walker's state whose
// stacks take every byte of the set this way, between them, accepts every token made of those
// bytes without stepping one, though its transitions part ways on the declared names' letters
// (so ContextWalker::plain_run, which needs one next state for all plain bytes, misses it).
// Only byte classes followed by tail calls count; a body that calls a character rule (a JSON
// string of well-formed UTF-8) is left to plain_run and text_safe.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/engine/grammar/grammar_ir.h"

namespace deepinfer::engine::grammar {

class ClosedRuns {
 public:
  // The two sets asked about: the plain bytes (VocabTrie::plain), and the text bytes (plain
  // and every byte from 0x80: the bytes of text tokens, VocabTrie::text_token_bits).
  static constexpr uint8_t kPlain = 1, kText = 2;
  // Cheap: rules are looked at on the first question that reaches them (g must outlive this).
  ClosedRuns(const Grammar& g, const ByteSet& plain);

  const ByteSet& bytes(uint8_t which) const { return sets_[which == kText].bytes; }
  // For byte-class position p: the sets (kPlain | kText) whose every run a byte taken at p
  // leads on to. Each rule's answer is kept for later questions.
  uint8_t after(uint32_t p);

 private:
  static constexpr int64_t kNoRule = -1;
  struct Set {
    ByteSet bytes;
    // [rules] index into `gives` once known, else -1 (or, while a question is being
    // answered, kInQuestion - i for the question's i-th rule).
    std::vector<int32_t> slot;
    // The bytes of the set that a known rule takes into closed continuations (all of the
    // set: the rule is closed).
    std::vector<ByteSet> gives;
  };
  // The rule that the continuation at position q tail-calls, after byte classes that each
  // hold all of s; kNoRule when it ends, calls without a tail, or meets a narrower class.
  int64_t continuation_rule(uint32_t q, const ByteSet& s) const;
  // What alternative a of some rule depends on: the rule its first byte leads on to, or the
  // rule it tail-calls at once; kNoRule when it gives nothing whatever the answer.
  int64_t dependency(uint32_t a, const ByteSet& s) const;
  // Rule r's bytes in set `set`: a greatest fixpoint over the rules r depends on that are not
  // known yet (a chain of tail calls from one rule reaches a byte class in finitely many
  // steps, as the grammar has no left recursion, so the fixpoint is sound).
  const ByteSet& gives(Set& set, uint32_t r);

  const Grammar& g_;
  Set sets_[2];                         // plain, text
  std::vector<uint32_t> rules_, todo_;  // gives' scratch
  std::vector<ByteSet> local_;
};

}  // namespace deepinfer::engine::grammar
