// ECMAScript-style regular expressions parsed into a small syntax tree over Unicode code
// points, shared by the grammar lowering (regex_compiler.cc) and the automaton construction
// (code_point_dfa.cc) that intersects patterns with each other and with length bounds.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/structured/automata/char_class.h"

namespace deepinfer::structured {

struct RegexNode {
  // kStart / kEnd: `^` / `$` inside the pattern (zero-width: only at the first / past the
  // last character); only the automaton construction (code_point_dfa.h) understands them.
  enum class Kind : uint8_t { kClass, kConcat, kAlt, kRepeat, kStart, kEnd };
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
  // `^(?=X)` / `^(?!X)` at the start of a top-level branch: the branch's strings must (not)
  // begin with a match of X. `node` is X followed by `[^]*`, so it is a whole-string language
  // intersected with (or subtracted from) the branch's.
  struct Lookahead {
    int node = -1;
    bool negative = false;
  };
  std::vector<std::vector<Lookahead>> lookaheads;  // [branches]
  bool has_assertions = false;                      // some kStart / kEnd node
  // Whether only an automaton can express the pattern (not the grammar-rule lowering).
  bool needs_automaton() const {
    if (has_assertions) return true;
    for (const auto& l : lookaheads)
      if (!l.empty()) return true;
    return false;
  }
};

// Parses `pattern`; `search` = JSON Schema `pattern` semantics (unanchored unless ^ / $).
// Errors name the construct refused (kUnsupported) or malformed (kInvalidArgument).
Result<RegexAst> parse_regex(std::string_view pattern, bool search);

}  // namespace deepinfer::structured
