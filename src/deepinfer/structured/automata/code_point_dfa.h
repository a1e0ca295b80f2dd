// Deterministic automata over Unicode code points, built from regexes (regex_ast.h), so that
// string languages can be intersected, complemented and length-bounded exactly before they
// are lowered to grammar rules: pattern + minLength/maxLength, pattern + format, and the
// split of property names among several patternProperties.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/structured/grammar_ir.h"
#include "deepinfer/structured/automata/regex_ast.h"

namespace deepinfer::structured {

// Past this many states a construction fails with kUnsupported naming the cap; the grammar
// gets one rule per state, and each is a context the mask precompute must classify.
inline constexpr size_t kMaxDfaStates = 4096;

// State 0 is the start. Transitions are per atom: disjoint code-point intervals that together
// cover every Unicode scalar value (surrogates excluded), so the automaton is complete up to
// the dead state -1.
struct CodePointDfa {
  std::vector<std::pair<uint32_t, uint32_t>> atoms;  // [num_atoms] sorted, inclusive
  std::vector<std::vector<int32_t>> next;            // [num_states][num_atoms], -1 = dead
  std::vector<uint8_t> accept;                       // [num_states]
  size_t num_states() const { return accept.size(); }
};

// The language of a parsed regex.
Result<CodePointDfa> dfa_from_regex(const RegexAst& ast, size_t max_states = kMaxDfaStates);
Result<CodePointDfa> dfa_from_pattern(std::string_view pattern, bool search,
                                      size_t max_states = kMaxDfaStates);
// The automata one compile has built from patterns, by (pattern, search, max_states): one
// schema names a patternProperties key once, but its compile matches it against every
// property name and object that it governs. The JSON Schema compiler owns one per compile
// and hands it down (nothing is kept across schemas); failures are not kept.
class PatternDfaMemo {
 public:
  PatternDfaMemo() = default;
  PatternDfaMemo(const PatternDfaMemo&) = delete;
  PatternDfaMemo& operator=(const PatternDfaMemo&) = delete;
  size_t size() const { return built_.size(); }

 private:
  friend Result<CodePointDfa> dfa_from_pattern(std::string_view, bool, PatternDfaMemo*, size_t);
  std::map<std::tuple<std::string, bool, size_t>, CodePointDfa> built_;
};
// As above, answered from `memo` when it built the same automaton before (memo may be null).
Result<CodePointDfa> dfa_from_pattern(std::string_view pattern, bool search, PatternDfaMemo* memo,
                                      size_t max_states = kMaxDfaStates);
// Exactly the given strings (UTF-8).
Result<CodePointDfa> dfa_of_strings(const std::vector<std::string>& strings);
// Runs the automata in lockstep; a tuple of states accepts when `accept` says so given which
// parts accept (so intersection, difference and "exactly these patterns match" are all one
// call).
Result<CodePointDfa> dfa_product(const std::vector<const CodePointDfa*>& parts,
                                 const std::function<bool(const std::vector<bool>&)>& accept,
                                 size_t max_states = kMaxDfaStates);
// Strings of `d` with between lo and hi code points (hi < 0: no upper bound).
Result<CodePointDfa> dfa_with_length(const CodePointDfa& d, int64_t lo, int64_t hi,
                                     size_t max_states = kMaxDfaStates);
// The largest bound h <= hi for which dfa_with_length(d, lo, h) stays within max_states
// (hi >= 0), found in one pass over the strings' lengths.
int64_t dfa_length_fit(const CodePointDfa& d, int64_t hi, size_t max_states = kMaxDfaStates);
// Drops states that are unreachable or cannot reach acceptance and merges equivalent ones.
CodePointDfa dfa_minimize(const CodePointDfa& d);
// dfa_minimize without merging when !merge (only the dead and unreachable states go).
CodePointDfa dfa_reduce(const CodePointDfa& d, bool merge);
bool dfa_is_empty(const CodePointDfa& d);
// Whether `d` accepts every string.
bool dfa_is_universal(const CodePointDfa& d);
// Shortest and longest accepted length in code points (longest -1: unbounded) of a minimized
// automaton; {-1, -1} for the empty language. Lets length bounds the pattern already implies
// be dropped instead of multiplying states.
std::pair<int64_t, int64_t> dfa_length_range(const CodePointDfa& d);
// Whether `d` accepts the UTF-8 string `s`.
bool dfa_matches(const CodePointDfa& d, std::string_view s);
// The code points of UTF-8 text (by lead-byte length; input is assumed valid).
std::vector<uint32_t> decode_utf8(std::string_view s);
// One rule per live state (tail calls, so matching runs in constant stack depth); characters
// are emitted as JSON string characters when json_string is set. An empty language gives a
// rule with no alternatives.
Element dfa_to_rule(GrammarBuilder& b, const CodePointDfa& d, bool json_string,
                    const std::string& name);

}  // namespace deepinfer::structured
