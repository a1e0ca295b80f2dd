// Unicode code-point sets lowered to UTF-8 byte grammar, optionally as the escaped form the
// character takes inside a JSON string literal.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "deepinfer/structured/grammar_ir.h"

namespace deepinfer::structured {

// Sorted, non-overlapping inclusive ranges of Unicode scalar values.
class CodePointSet {
 public:
  void add(uint32_t lo, uint32_t hi);
  void add(uint32_t cp) { add(cp, cp); }
  void add(const CodePointSet& o);
  CodePointSet complement() const;  // within [0, 0x10FFFF] minus surrogates
  CodePointSet ignore_case() const;  // ASCII letters only
  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

  static CodePointSet any();
  static CodePointSet digit();
  static CodePointSet word();
  static CodePointSet space();

 private:
  void normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// One rule call matching exactly one character of `set` (UTF-8). With json_string, the
// character is written as a JSON string does: '"' as \", '\' as \\, controls escaped.
Element char_class(GrammarBuilder& b, const CodePointSet& set, bool json_string);

// Any single JSON-string character (in its escaped form when needed).
Element json_string_char(GrammarBuilder& b);

}  // namespace deepinfer::structured
