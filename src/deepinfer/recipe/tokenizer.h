// Byte-level BPE tokenizer built from GGUF metadata or a Hugging Face tokenizer.json, plus the
// streaming detokenizer. Text that looks like a control token is plain text unless the caller
// (a chat template, never a user) asks for special-token matching.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/recipe/bpe.h"
#include "deepinfer/recipe/pretokenizer.h"

namespace deepinfer::format {
class GgufFile;
}

namespace deepinfer::recipe {

// Everything a tokenizer is made of, in loader-neutral form (raw bytes, not the byte-level
// alphabet). Loaders fill it; Tokenizer::build validates it.
struct TokenizerSpec {
  struct Added {
    int32_t id = 0;
    bool special = true;  // control token: matched only when allow_special
    bool lstrip = false;  // swallow whitespace on the left / right when matched
    bool rstrip = false;
    // Matched only when allow_special (like `special`) but kept by decode(skip_special): the
    // markers an output parser must still see (DeepSeek's <think>, tool-call markers).
    bool control = false;
  };
  std::vector<std::string> token_bytes;  // [vocab_size]
  std::vector<std::pair<std::string, std::string>> merges;  // rank order
  std::vector<Added> added;
  PreTokenizer pre;
  bool ignore_merges = false;
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false;
  std::vector<int32_t> extra_eos;  // e.g. from generation_config.json
  std::string chat_template;
};

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const format::GgufFile& gguf);
  static Result<std::unique_ptr<Tokenizer>> from_hf_dir(const std::string& dir);
  static Result<std::unique_ptr<Tokenizer>> build(TokenizerSpec spec);

  // allow_special=false: text that looks like a control token (e.g. "<|im_start|>") is encoded
  // as plain text (HF's split_special_tokens=True). Non-special added tokens always match,
  // except control ones (see TokenizerSpec::Added::control).
  std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const;
  // Special tokens are matched only when they lie entirely inside one of `trusted` byte ranges
  // [begin, end) of `text` (template literals); everything else is plain text. Text between
  // matches is pre-tokenized as one run, so the result equals HF encoding of the whole string
  // whenever the untrusted parts contain no control-token text.
  std::vector<int32_t> encode_trusted(std::string_view text,
                                      const std::vector<std::pair<size_t, size_t>>& trusted) const;
  // Lossy: invalid UTF-8 in the joined bytes becomes U+FFFD.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  const std::string& token_bytes(int32_t id) const;  // raw bytes; empty for out-of-range ids

  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t pad_id() const { return pad_id_; }
  bool add_bos() const { return add_bos_; }
  bool is_special(int32_t id) const;
  // Id of a special or control added token with exactly this text.
  std::optional<int32_t> special_token_id(std::string_view text) const;
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  const std::string& chat_template() const { return chat_template_; }

 private:
  Tokenizer() = default;
  struct Match {
    size_t begin, end;  // bytes of text consumed (including stripped whitespace)
    int32_t id;
  };
  // Finds the leftmost-longest added-token match at or after `from`; `allowed(b, e, special)`
  // filters candidates.
  template <typename Allowed>
  std::optional<Match> find_added(std::string_view text, size_t from, const Allowed& allowed) const;
  template <typename Allowed>
  std::vector<int32_t> encode_impl(std::string_view text, const Allowed& allowed) const;
  void encode_plain(std::string_view text, std::vector<int32_t>* out) const;

  std::vector<std::string> tokens_;
  std::vector<uint8_t> special_;  // [vocab_size] 1 for control tokens
  struct AddedEntry {
    std::string text;
    int32_t id;
    bool special, lstrip, rstrip;
    bool control;  // special || Added::control: never matched in untrusted text
  };
  std::vector<AddedEntry> added_;       // sorted by text
  bool added_first_byte_[256] = {};     // quick reject for the matcher
  PreTokenizer pre_;
  BpeModel bpe_;
  int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1, pad_id_ = -1;
  bool add_bos_ = false;
  std::vector<int32_t> eos_ids_;
  std::string chat_template_;
};

// Turns generated ids into text incrementally: push() returns only complete UTF-8 characters,
// holding back a trailing partial sequence until the next token completes it; bytes that can
// never become valid come out as U+FFFD. The concatenation of all push() results and finish()
// equals tokenizer.decode(ids, skip_special).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, bool skip_special = false)
      : tok_(&tok), skip_special_(skip_special) {}
  std::string push(int32_t id);
  std::string finish();

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace deepinfer::recipe
