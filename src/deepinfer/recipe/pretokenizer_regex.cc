// PCRE2 wrapper for pre-tokenizer regexes (see pretokenizer_regex.h).
#include "deepinfer/recipe/pretokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace deepinfer::recipe {
namespace {

// Per-thread match buffers: a JIT stack big enough for long whitespace runs (the lookahead in
// `\s+(?!\S)` backtracks over the whole run) and one match-data block.
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(32, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

std::string widen_whitespace_classes(std::string_view p) {
  std::string out;
  bool in_class = false;
  size_t class_start = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[i + 1];
      if (n == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (n == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else {
        out.push_back(c);
        out.push_back(n);
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      class_start = out.size() + 1;
      out.push_back(c);
      if (i + 1 < p.size() && p[i + 1] == '^') {
        out.push_back('^');
        ++i;
        class_start = out.size();
      }
      continue;
    }
    // A ']' right after the opening bracket is a literal member, not the end.
    if (in_class && c == ']' && out.size() > class_start) in_class = false;
    out.push_back(c);
  }
  return out;
}

Result<std::shared_ptr<const CompiledRegex>> CompiledRegex::compile(const std::string& pattern) {
  std::string widened = widen_whitespace_classes(pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(widened.data()), widened.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err,
                                   &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return invalid_argument("pre-tokenizer regex '{}' does not compile at offset {}: {}", pattern,
                            static_cast<size_t>(err_off), reinterpret_cast<const char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
  auto re = std::shared_ptr<CompiledRegex>(new CompiledRegex());
  re->pattern_ = pattern;
  re->code_ = code;
  return std::shared_ptr<const CompiledRegex>(std::move(re));
}

CompiledRegex::~CompiledRegex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void CompiledRegex::for_each_match(std::string_view subject,
                                   const std::function<void(size_t, size_t)>& fn) const {
  ThreadMatchState& st = thread_state();
  auto* code = static_cast<pcre2_code*>(code_);
  auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos < subject.size()) {
    int rc = pcre2_match(code, s, subject.size(), pos, 0, st.data, st.context);
    if (rc < 0) break;  // no match (or a resource limit): the rest stays one gap piece
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      fn(b, e);
      pos = e;
    } else {
      // Empty match: step over one byte, then any continuation bytes of that character.
      pos = b + 1;
      while (pos < subject.size() && (static_cast<uint8_t>(subject[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
}

}  // namespace deepinfer::recipe
