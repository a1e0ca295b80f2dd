// Drafters propose tokens that may follow a sequence; the target model verifies them in its
// next step (verify.h). A drafter also reports the signals an acceptance estimate needs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace deepinfer::engine::speculative {

struct Draft {
  std::vector<int32_t> tokens;  // [<= max_tokens] proposed continuation, in order
  int match_length = 0;         // n-gram drafters: tokens of context the proposal matched
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // `tokens`: the sequence so far (prompt then output). Proposes at most max_tokens tokens;
  // an empty draft means nothing worth verifying.
  virtual Draft propose(std::span<const int32_t> tokens, int max_tokens) const = 0;
  virtual std::string_view name() const = 0;
};

// Prompt lookup: finds the most recent earlier occurrence of the sequence's last n tokens
// (longest n first, from max_ngram down to min_ngram) and proposes the tokens that followed it.
std::unique_ptr<Drafter> make_ngram_drafter(int max_ngram = 4, int min_ngram = 1);

}  // namespace deepinfer::engine::speculative
