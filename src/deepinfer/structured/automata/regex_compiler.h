// ECMAScript-style regular expressions (no backreferences; lookahead only where regex_ast.h
// says) lowered to the grammar IR, either over raw text or over the escaped characters of a
// JSON string body.
#pragma once

#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/structured/grammar_ir.h"

namespace deepinfer::structured {

struct RegexOptions {
  bool json_string = false;  // match the string's characters as they appear inside "..."
  bool search = false;       // JSON Schema `pattern`: unanchored unless ^ / $ are given
};

// Returns a rule call matching the pattern's language. Errors name the construct refused.
Result<Element> compile_regex(GrammarBuilder& b, std::string_view pattern, const RegexOptions& o);

}  // namespace deepinfer::structured
