// Grammar positions from which a stack takes any run of bytes of a set, whatever lies below
// it: the byte taken there leads into a rule that takes every byte of the set again, the same
// way, and never has to end first (it may call itself and grow the stack). A context
// walker's state whose stacks do this between them accepts every token made of those bytes
// without stepping one, where ContextWalker::plain_run (one next state for all plain bytes)
// sees nothing: a property name that must differ from the declared ones (key_excluding in
// json_schema/parts.cc: a trie of rules, one per prefix, each falling back to a loop over
// string bytes), a regex's `.*` beside the words of a search pattern. A loop that calls a
// character rule and then itself (a JSON string body) counts through the character rule's
// one-byte alternatives, and, for text tokens, by whole characters (kTextChars) when its
// multi-byte alternatives cover every well-formed UTF-8 form.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/structured/grammar_ir.h"

namespace deepinfer::structured {

class ClosedRuns {
 public:
  // The sets asked about: the plain bytes (VocabTrie::plain); the text bytes (plain and every
  // byte from 0x80: the bytes of text tokens, VocabTrie::text_token_bits), byte by byte; and
  // text by characters (kTextChars: plain bytes and whole well-formed UTF-8 characters, or
  // their start at a token's end), which a loop over a character rule that validates UTF-8
  // takes though it does not take every run of bytes from 0x80.
  static constexpr uint8_t kPlain = 1, kText = 2, kTextChars = 4;
  // Cheap: rules are looked at on the first question that reaches them (g must outlive this).
  ClosedRuns(const Grammar& g, const ByteSet& plain);

  // The set's bytes; for kTextChars, the plain bytes and 0x80, which there stands for every
  // multi-byte character (a state's stacks are asked about those through multibyte_leads).
  const ByteSet& bytes(uint8_t which) const { return set_of(which).bytes; }
  // For byte-class position p: the sets (kPlain | kText | kTextChars) whose every run a byte
  // taken at p leads on to. Each rule's answer is kept for later questions. The text sets are
  // asked only where kPlain holds (they hold the plain bytes; a "no" is always safe).
  uint8_t after(uint32_t p);
  // For a rule that ends after the byte it takes (a character rule's one-byte alternative):
  // the same for where it returns to, after the call at position call_site (the stack's
  // parent frame).
  uint8_t after_return(uint32_t call_site);
  // The lead bytes of the well-formed multi-byte UTF-8 characters that a stack at position
  // p takes whole and then ends its rule on (byte classes as long as the character, holding
  // its ranges, then the end): with kTextChars from where it returns, such stacks between
  // them take every multi-byte character when their leads pass every_lead().
  ByteSet multibyte_leads(uint32_t p) const;
  static bool every_lead(const ByteSet& leads);
  // Rule r takes every well-formed multi-byte character by its alternatives. Cached per rule.
  bool takes_every_multibyte_character(uint32_t r);

 private:
  static constexpr int64_t kNoRule = -1;
  struct Set {
    ByteSet bytes;
    bool by_characters = false;
    // [rules] index into `gives` once known, else -1 (or, while a question is being
    // answered, -2 - i for the question's i-th rule).
    std::vector<int32_t> slot;
    // The bytes of the set that a known rule takes into closed continuations (all of the
    // set: the rule is closed).
    std::vector<ByteSet> gives;
  };
  const Set& set_of(uint8_t which) const {
    return sets_[which == kText ? 1 : which == kTextChars ? 2 : 0];
  }
  // The rule the continuation at position q enters (by a call, after byte classes that each
  // hold all of the set's bytes, or at once for kTextChars); kNoRule when it ends or meets a
  // narrower class first.
  int64_t continuation_rule(uint32_t q, const Set& set) const;
  // What alternative a of some rule depends on: the rule it starts by calling, and the rule
  // its continuation enters after its first byte class or after that call returns (kNoRule
  // where there is none, or the call is a tail call).
  struct AltDeps {
    int64_t entered = kNoRule, then = kNoRule;
  };
  AltDeps dependencies(uint32_t a, const Set& set) const;
  // The bytes rule r takes in one byte and then returns on (its [bytes] alternatives).
  ByteSet one_byte_returns(uint32_t r) const;
  // The sets whose every run the continuation at position q leads on to.
  uint8_t continues(uint32_t q);
  // Rule r's bytes in set `set`: a greatest fixpoint over the rules r depends on that are not
  // known yet (see closed_runs.cc for why it is sound).
  const ByteSet& gives(Set& set, uint32_t r);

  const Grammar& g_;
  Set sets_[3];                    // plain, text, text by characters
  std::vector<int8_t> multibyte_;  // [rules] takes_every_multibyte_character; -1 unknown
  // gives' scratch: the question's rules, their alternatives' dependencies, and each rule's
  // users (the rules of the question whose alternatives depend on it), flat.
  std::vector<uint32_t> rules_, todo_;
  std::vector<std::pair<uint32_t, AltDeps>> deps_;  // (alternative, what it depends on)
  std::vector<uint32_t> dep_begin_, dep_end_;       // [rules_] ranges of deps_
  std::vector<uint32_t> users_, user_begin_, fill_;
  std::vector<uint8_t> queued_;
  std::vector<ByteSet> local_;
};

}  // namespace deepinfer::structured
