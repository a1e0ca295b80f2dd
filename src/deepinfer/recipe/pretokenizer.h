// Pre-tokenization: the regex splits a byte-level BPE model declares (GGUF `pre` name or a
// tokenizer.json pre_tokenizer), run with PCRE2 in UTF + UCP mode with JIT.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "deepinfer/base/status.h"

namespace deepinfer::recipe {

// What happens to the regex matches when a piece is split (HF SplitDelimiterBehavior).
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class CompiledRegex;

class PreTokenizer {
 public:
  // Maps a GGUF `tokenizer.ggml.pre` name to its split regexes ("default" when empty).
  static Result<PreTokenizer> from_gguf_pre(std::string_view pre);
  // Interprets a tokenizer.json `pre_tokenizer` value (null, ByteLevel, Split, Digits,
  // Sequence of these); anything else is refused as unsupported.
  static Result<PreTokenizer> from_hf_json(const nlohmann::json& j);
  // One regex step with Isolated behaviour (tests and custom setups).
  static Result<PreTokenizer> from_regex(const std::string& pattern);

  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Splits `text` into pieces, appended to `out`. Pieces point into `text` or into strings
  // kept in `arena` (when a step adds a prefix space). Invalid UTF-8 never matches a regex,
  // so such bytes come out as pieces of their own.
  void split(std::string_view text, std::deque<std::string>* arena,
             std::vector<std::string_view>* out) const;

  size_t num_steps() const { return steps_.size(); }

 private:
  struct Step {
    std::shared_ptr<const CompiledRegex> regex;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel(add_prefix_space): applied to every piece
  };
  Status add_regex_step(const std::string& pattern, SplitBehavior behavior, bool invert,
                        bool add_prefix_space);
  Status add_hf_step(const nlohmann::json& j);
  void apply_step(const Step& step, std::string_view piece, std::deque<std::string>* arena,
                  std::vector<std::string_view>* out) const;

  std::vector<Step> steps_;
};

// The GPT-2 split regex (HF ByteLevel with use_regex=true).
extern const char* const kGpt2SplitRegex;

}  // namespace deepinfer::recipe
