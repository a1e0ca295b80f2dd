// The n-gram (prompt lookup) drafter: no weights, works with every model. Repetitive tasks
// (editing a given file, copying fields out of a document) repeat long spans of their context.
#include <algorithm>
#include <string_view>

#include "deepinfer/engine/speculative/drafter.h"

namespace deepinfer::engine::speculative {
namespace {

class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int max_ngram, int min_ngram) : max_ngram_(max_ngram), min_ngram_(min_ngram) {}

  std::vector<Draft> propose(std::span<const DraftInput> seqs) override {
    std::vector<Draft> out;
    out.reserve(seqs.size());
    for (const DraftInput& s : seqs) out.push_back(propose_one(s.tokens, s.max_tokens));
    return out;
  }

  std::string_view name() const override { return "ngram"; }

 private:
  Draft propose_one(std::span<const int32_t> tokens, int max_tokens) const {
    Draft d;
    const int len = static_cast<int>(tokens.size());
    if (max_tokens <= 0) return d;
    for (int n = std::min(max_ngram_, len - 1); n >= min_ngram_; --n) {
      const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
      // Most recent earlier occurrence: its continuation starts at start + n < len.
      for (int start = len - n - 1; start >= 0; --start) {
        if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
        const int from = start + n;
        const int count = std::min(max_tokens, len - from);
        d.tokens.assign(tokens.begin() + from, tokens.begin() + from + count);
        d.match_length = n;
        d.context_match = n;
        for (int a = start - 1, b = len - n - 1;
             a >= 0 && d.context_match < kMaxContextMatch && tokens[a] == tokens[b]; --a, --b)
          ++d.context_match;
        d.distance = len - from;
        count_agreement(tokens, suffix, start, d);
        return d;
      }
    }
    return d;
  }

  // Draft::occurrences, support and agree: the occurrences of `suffix` at `start` (the
  // draft's source) and before it, most recent first.
  static void count_agreement(std::span<const int32_t> tokens, std::span<const int32_t> suffix, int start,
                              Draft& d) {
    const int len = static_cast<int>(tokens.size());
    const int n = static_cast<int>(suffix.size());
    const int k = static_cast<int>(d.tokens.size());
    d.support.assign(static_cast<size_t>(k), 0);
    d.agree.assign(static_cast<size_t>(k), 0);
    d.occurrences = 0;
    for (int s = start; s >= 0 && d.occurrences < kMaxOccurrences; --s) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + s)) continue;
      ++d.occurrences;
      // Walk its continuation while it follows the draft.
      for (int j = 0; j < k && s + n + j < len; ++j) {
        ++d.support[static_cast<size_t>(j)];
        if (tokens[static_cast<size_t>(s + n + j)] != d.tokens[static_cast<size_t>(j)]) break;
        ++d.agree[static_cast<size_t>(j)];
      }
    }
  }

  int max_ngram_;
  int min_ngram_;
};

}  // namespace

std::unique_ptr<Drafter> make_ngram_drafter(int max_ngram, int min_ngram) {
  return std::make_unique<NgramDrafter>(max_ngram, min_ngram);
}

}  // namespace deepinfer::engine::speculative
