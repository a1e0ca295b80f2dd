// Drafters propose tokens that may follow a sequence; the target model verifies them in its
// next step (verify.h). A drafter also reports the signals an acceptance estimate needs.
//
// One call proposes for every sequence of a step, so a drafter with weights (a draft model)
// runs one forward per draft position for all of them. A drafter may keep state per sequence
// (a draft model's KV) between calls, keyed by seq_id, until forget(seq_id).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace deepinfer::engine::speculative {

inline constexpr int kMaxContextMatch = 64;

struct Draft {
  std::vector<int32_t> tokens;  // [<= max_tokens] proposed continuation, in order
  int match_length = 0;         // n-gram drafters: tokens of context the proposal matched
  // n-gram drafters: how far back the matched occurrence agrees with the sequence's end
  // (>= match_length, capped at kMaxContextMatch): a long agreement means a span being copied.
  int context_match = 0;
  // Per-token confidence signal, a bucket 1 .. kMaxSignal that the acceptance estimate is kept
  // by (dspark_policy.h; it learns each bucket's rate, so the numbering carries no order).
  // [tokens.size()], or empty: from the n-gram fields below (speculator.cc).
  std::vector<int> signals;
  // n-gram drafters: the earlier occurrences of the matched n-gram (up to kMaxOccurrences, most
  // recent first; the draft follows the most recent) and, per draft position j, how many of
  // them continue like the draft before j (`support[j]`: tokens j-1 and before equal the
  // draft's, and the occurrence has a token at j) and how many of those also have the draft's
  // token at j (`agree[j]`, >= 1: the source itself). A token every occurrence agrees on is far
  // likelier to be the target's than one where they part. [tokens.size()] each, or empty.
  int occurrences = 0;
  std::vector<int> support;
  std::vector<int> agree;
  int distance = 0;  // n-gram drafters: tokens from the source's continuation to the end
};

inline constexpr int kMaxOccurrences = 32;

struct DraftInput {
  int64_t seq_id = 0;
  std::span<const int32_t> tokens;  // the sequence so far: prompt then output
  int max_tokens = 0;               // most tokens to propose; <= 0: none
};

// Rows of a target forward that computed tokens of a sequence: positions
// [first_position, first_position + num_tokens) are rows [row, row + num_tokens) of the batch.
struct ComputedSpan {
  int64_t seq_id = 0;
  int first_position = 0;
  int num_tokens = 0;
  int row = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // [seqs.size()] drafts, in order; an empty draft means nothing worth verifying.
  virtual std::vector<Draft> propose(std::span<const DraftInput> seqs) = 0;
  // After every target forward (prefill chunks, decode steps, verified drafts alike): a drafter
  // that reads the target's own activations (the MTP head) copies what it needs. Positions of
  // drafts the target then rejected are among them; such rows are rewritten by a later forward
  // before the sequence's computed tokens reach them.
  virtual void target_computed(std::span<const ComputedSpan> spans) { (void)spans; }
  // The sequence ended: drop what is kept for it.
  virtual void forget(int64_t seq_id) { (void)seq_id; }
  virtual std::string_view name() const = 0;
};

// Prompt lookup: finds the most recent earlier occurrence of the sequence's last n tokens
// (longest n first, from max_ngram down to min_ngram) and proposes the tokens that followed it.
// Stateless.
std::unique_ptr<Drafter> make_ngram_drafter(int max_ngram = 4, int min_ngram = 1);

}  // namespace deepinfer::engine::speculative
