// Tokenizer: added-token matching around byte-level BPE, decoding (see tokenizer.h).
#include "deepinfer/recipe/tokenizer.h"

#include <algorithm>

#include "deepinfer/recipe/byte_level.h"

namespace deepinfer::recipe {
namespace {

// End-of-turn tokens that also stop generation when the vocabulary marks them special.
constexpr std::string_view kEndOfTurnTokens[] = {
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>",
    "<end_of_turn>", "<|end|>", "<|return|>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
};

// DeepSeek's vocabularies mark their chat and tool markers (<｜User｜>, <think>,
// <｜tool▁calls▁begin｜>, ...) as non-special added tokens so that decoding keeps them; HF
// would then match them inside user text. Every added token of such a vocabulary is control.
constexpr std::string_view kDeepseekBos = "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::build(TokenizerSpec spec) {
  const auto n = static_cast<int32_t>(spec.token_bytes.size());
  if (n == 0) return invalid_argument("tokenizer: empty vocabulary");
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->special_.assign(n, 0);
  std::vector<bool> mergeable(n, true);
  bool deepseek = false;
  for (const auto& a : spec.added)
    if (a.id >= 0 && a.id < n && spec.token_bytes[a.id] == kDeepseekBos) deepseek = true;
  for (const auto& a : spec.added) {
    if (a.id < 0 || a.id >= n)
      return corrupt("tokenizer: added token id {} outside the vocabulary of {}", a.id, n);
    if (spec.token_bytes[a.id].empty())
      return corrupt("tokenizer: added token id {} has empty text", a.id);
    mergeable[a.id] = false;
    t->special_[a.id] = a.special ? 1 : 0;
    t->added_.push_back({spec.token_bytes[a.id], a.id, a.special, a.lstrip, a.rstrip,
                         a.special || a.control || deepseek});
    t->added_first_byte_[static_cast<uint8_t>(spec.token_bytes[a.id][0])] = true;
  }
  // Longest first, so the matcher's first hit at a position is the longest one.
  std::stable_sort(t->added_.begin(), t->added_.end(), [](const AddedEntry& a, const AddedEntry& b) {
    return a.text.size() > b.text.size();
  });
  DI_ASSIGN_OR_RETURN(t->bpe_, BpeModel::build(spec.token_bytes, mergeable, spec.merges,
                                               spec.ignore_merges));
  auto check_id = [n](int32_t id, const char* what) -> Status {
    if (id >= n) return corrupt("tokenizer: {} id {} outside the vocabulary of {}", what, id, n);
    return Status::ok();
  };
  DI_RETURN_IF_ERROR(check_id(spec.bos_id, "bos"));
  DI_RETURN_IF_ERROR(check_id(spec.eos_id, "eos"));
  DI_RETURN_IF_ERROR(check_id(spec.unk_id, "unk"));
  DI_RETURN_IF_ERROR(check_id(spec.pad_id, "pad"));
  t->tokens_ = std::move(spec.token_bytes);
  t->pre_ = std::move(spec.pre);
  t->bos_id_ = spec.bos_id;
  t->eos_id_ = spec.eos_id;
  t->unk_id_ = spec.unk_id;
  t->pad_id_ = spec.pad_id;
  t->add_bos_ = spec.add_bos && spec.bos_id >= 0;
  t->chat_template_ = std::move(spec.chat_template);
  auto add_eos = [&](int32_t id) {
    if (id >= 0 && id < n && std::find(t->eos_ids_.begin(), t->eos_ids_.end(), id) == t->eos_ids_.end())
      t->eos_ids_.push_back(id);
  };
  add_eos(spec.eos_id);
  for (int32_t id : spec.extra_eos) add_eos(id);
  for (std::string_view name : kEndOfTurnTokens) {
    if (auto id = t->special_token_id(name)) add_eos(*id);
  }
  return t;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || id >= vocab_size()) return kEmpty;
  return tokens_[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[id] != 0;
}

std::optional<int32_t> Tokenizer::special_token_id(std::string_view text) const {
  for (const auto& a : added_)
    if (a.control && a.text == text) return a.id;
  return std::nullopt;
}

template <typename Allowed>
std::optional<Tokenizer::Match> Tokenizer::find_added(std::string_view text, size_t from,
                                                      const Allowed& allowed) const {
  if (added_.empty()) return std::nullopt;
  for (size_t p = from; p < text.size(); ++p) {
    if (!added_first_byte_[static_cast<uint8_t>(text[p])]) continue;
    for (const auto& a : added_) {
      if (text.compare(p, a.text.size(), a.text) != 0) continue;
      if (!allowed(p, p + a.text.size(), a.control)) continue;
      Match m{p, p + a.text.size(), a.id};
      if (a.lstrip)
        while (m.begin > from && is_ascii_space(text[m.begin - 1])) --m.begin;
      if (a.rstrip)
        while (m.end < text.size() && is_ascii_space(text[m.end])) ++m.end;
      return m;
    }
  }
  return std::nullopt;
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>* out) const {
  if (text.empty()) return;
  std::deque<std::string> arena;
  std::vector<std::string_view> pieces;
  pre_.split(text, &arena, &pieces);
  for (std::string_view piece : pieces) bpe_.encode_word(piece, out);
}

template <typename Allowed>
std::vector<int32_t> Tokenizer::encode_impl(std::string_view text, const Allowed& allowed) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  size_t pos = 0;
  while (pos < text.size()) {
    auto m = find_added(text, pos, allowed);
    if (!m) {
      encode_plain(text.substr(pos), &out);
      break;
    }
    encode_plain(text.substr(pos, m->begin - pos), &out);
    out.push_back(m->id);
    pos = m->end;
  }
  return out;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  return encode_impl(text, [allow_special](size_t, size_t, bool control) {
    return allow_special || !control;
  });
}

std::vector<int32_t> Tokenizer::encode_trusted(
    std::string_view text, const std::vector<std::pair<size_t, size_t>>& trusted) const {
  return encode_impl(text, [&trusted](size_t b, size_t e, bool control) {
    if (!control) return true;
    for (const auto& [tb, te] : trusted)
      if (b >= tb && e <= te) return true;
    return false;
  });
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    bytes += token_bytes(id);
  }
  return utf8_make_valid(bytes);
}

std::string StreamingDetokenizer::push(int32_t id) {
  if (skip_special_ && tok_->is_special(id)) return {};
  pending_ += tok_->token_bytes(id);
  // Emit everything except a trailing sequence that a later token could still complete.
  size_t i = 0, keep_from = pending_.size();
  while (i < pending_.size()) {
    int len = utf8_sequence_length(pending_, i);
    if (len > 0) {
      i += len;
      continue;
    }
    int partial = utf8_incomplete_prefix_length(pending_, i);
    if (partial > 0 && i + partial == pending_.size()) {
      keep_from = i;
      break;
    }
    ++i;  // invalid byte: utf8_make_valid below turns it into U+FFFD
  }
  std::string out = utf8_make_valid(std::string_view(pending_).substr(0, keep_from));
  pending_.erase(0, keep_from);
  return out;
}

std::string StreamingDetokenizer::finish() {
  std::string out = utf8_make_valid(pending_);
  pending_.clear();
  return out;
}

}  // namespace deepinfer::recipe
