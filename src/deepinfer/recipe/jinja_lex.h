// Lexing for the chat-template interpreter (internal): template source -> text and tag
// segments with HF's whitespace rules applied; tag contents -> expression tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::recipe::jinja {

struct Segment {
  enum class Kind { kText, kExpr, kStmt, kComment } kind;
  std::string content;
  bool strip_before = false, strip_after = false, keep_before = false;
};

// Splits the source, applying trim_blocks, lstrip_blocks and the '-' / '+' markers.
Result<std::vector<Segment>> split_segments(std::string_view src);

struct Tok {
  enum class Kind { kName, kString, kInt, kOp, kEnd } kind;
  std::string text;
  int64_t num = 0;
};

Result<std::vector<Tok>> lex(std::string_view s);

}  // namespace deepinfer::recipe::jinja
