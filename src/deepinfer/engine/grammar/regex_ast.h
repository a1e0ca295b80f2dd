// ECMAScript-style regular expressions parsed into a small syntax tree over Unicode code
// points, shared by the grammar lowering (regex_compiler.cc) and the automaton construction
// (code_point_dfa.cc) that intersects patterns with each other and with length bounds.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/grammar/char_class.h"

namespace deepinfer::engine::grammar {

struct RegexNode {
  enum class Kind : uint8_t { kClass, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kConcat;
  CodePointSet set;        // kClass: one character of the set
  std::vector<int> kids;   // kConcat (empty = the empty string), kAlt, kRepeat (one kid)
  int64_t lo = 0, hi = 0;  // kRepeat: hi < 0 = unbounded

  static RegexNode of(Kind k, std::vector<int> kids = {}, int64_t lo = 0, int64_t hi = 0) {
    RegexNode n;
    n.kind = k;
    n.kids = std::move(kids);
    n.lo = lo;
    n.hi = hi;
    return n;
  }
  static RegexNode of_class(const CodePointSet& s) {
    RegexNode n;
    n.kind = Kind::kClass;
    n.set = s;
    return n;
  }
};

struct RegexAst {
  std::vector<RegexNode> nodes;
  // Top-level alternatives, each a kConcat with search padding (`[^]*`) already added where
  // `search` semantics leave an end unanchored.
  std::vector<int> branches;
};

// Parses `pattern`; `search` = JSON Schema `pattern` semantics (unanchored unless ^ / $).
// Errors name the construct refused (kUnsupported) or malformed (kInvalidArgument).
Result<RegexAst> parse_regex(std::string_view pattern, bool search);

}  // namespace deepinfer::engine::grammar
