// A PCRE2 regex compiled in UTF + UCP mode (JIT when available) that tolerates invalid UTF-8
// in the subject: those bytes simply never match.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "deepinfer/base/status.h"

namespace deepinfer::recipe {

class CompiledRegex {
 public:
  static Result<std::shared_ptr<const CompiledRegex>> compile(const std::string& pattern);
  ~CompiledRegex();
  CompiledRegex(const CompiledRegex&) = delete;
  CompiledRegex& operator=(const CompiledRegex&) = delete;

  // Calls fn(begin, end) for each non-empty, non-overlapping match, left to right.
  // Thread-safe: match state lives in thread-local storage.
  void for_each_match(std::string_view subject,
                      const std::function<void(size_t, size_t)>& fn) const;

  const std::string& pattern() const { return pattern_; }

 private:
  CompiledRegex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

// Rewrites \s and \S so they also cover U+0085 (NEXT LINE): the Oniguruma engine behind HF
// tokenizers counts it as whitespace, PCRE2's UCP mode does not.
std::string widen_whitespace_classes(std::string_view pattern);

}  // namespace deepinfer::recipe
