// Pre-tokenizer steps and the GGUF `pre` name table (see pretokenizer.h).
#include "deepinfer/recipe/pretokenizer.h"

#include <nlohmann/json.hpp>

#include "deepinfer/recipe/pretokenizer_regex.h"

namespace deepinfer::recipe {

const char* const kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// Regexes as the models' own tokenizer.json files declare them (llama.cpp uses the same
// lists for these `pre` names). Each list is applied in order, every step splitting the
// pieces of the previous one with Isolated behaviour.
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kDeepseekV3Regexes[] = {
    R"(\p{N}{1,3})",
    R"([\x{4e00}-\x{9fa5}\x{3040}-\x{309f}\x{30a0}-\x{30ff}]+)",
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};
const char* const kDeepseekLlmRegexes[] = {
    R"([\r\n])",
    R"(\s?[A-Za-z\x{b5}\x{c0}-\x{d6}\x{d8}-\x{f6}\x{f8}-\x{1ba}\x{1bc}-\x{1bf}\x{1c4}-\x{293}\x{295}-\x{2af}\x{370}-\x{373}\x{376}\x{377}\x{37b}-\x{37d}\x{37f}\x{386}\x{388}-\x{38a}\x{38c}\x{38e}-\x{3a1}\x{3a3}-\x{3f5}\x{3f7}-\x{481}\x{48a}-\x{52f}\x{531}-\x{556}\x{10a0}-\x{10c5}\x{13a0}-\x{13f5}\x{13f8}-\x{13fd}\x{1c90}-\x{1cba}\x{1cbd}-\x{1cbf}\x{1d00}-\x{1d2b}\x{1d6b}-\x{1d77}\x{1d79}-\x{1d9a}\x{1e00}-\x{1f15}\x{1f18}-\x{1f1d}\x{1f20}-\x{1f45}\x{1f48}-\x{1f4d}\x{1f50}-\x{1f57}\x{1f59}\x{1f5b}\x{1f5d}\x{1f5f}-\x{1f7d}\x{1f80}-\x{1fb4}\x{1fb6}-\x{1fbc}\x{1fbe}\x{1fc2}-\x{1fc4}\x{1fc6}-\x{1fcc}\x{1fd0}-\x{1fd3}\x{1fd6}-\x{1fdb}\x{1fe0}-\x{1fec}\x{1ff2}-\x{1ff4}\x{1ff6}-\x{1ffc}\x{2102}\x{2107}\x{210a}-\x{2113}\x{2115}\x{2119}-\x{211d}\x{2124}\x{2126}\x{2128}\x{212a}-\x{212d}\x{212f}-\x{2134}\x{2139}\x{213c}-\x{213f}\x{2145}-\x{2149}\x{214e}\x{2183}\x{2184}\x{2c00}-\x{2c7b}\x{2c7e}-\x{2ce4}\x{2ceb}-\x{2cee}\x{2cf2}\x{2cf3}\x{a640}-\x{a66d}\x{a680}-\x{a69b}\x{a722}-\x{a76f}\x{a771}-\x{a787}\x{a78b}-\x{a78e}\x{ab70}-\x{abbf}\x{fb00}-\x{fb06}\x{fb13}-\x{fb17}\x{ff21}-\x{ff3a}\x{ff41}-\x{ff5a}\x{10400}-\x{1044f}\x{104b0}-\x{104d3}\x{104d8}-\x{104fb}\x{10c80}-\x{10cb2}\x{10cc0}-\x{10cf2}\x{118a0}-\x{118df}\x{1e900}-\x{1e943}]+)",
    R"(\s?[!-/:-~\x{ff01}-\x{ff0f}\x{ff1a}-\x{ff5e}\x{2018}-\x{201f}\x{3000}-\x{3002}]+)",
    R"(\s+$)",
    R"([\x{4e00}-\x{9fa5}\x{800}-\x{4e00}\x{ac00}-\x{d7ff}]+)",
    R"(\p{N}+)",
};

Result<SplitBehavior> parse_behavior(const std::string& s) {
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  return invalid_argument("tokenizer.json: unknown Split behavior '{}'", s);
}

std::string escape_literal(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-/").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

Status PreTokenizer::add_regex_step(const std::string& pattern, SplitBehavior behavior,
                                    bool invert, bool add_prefix_space) {
  DI_ASSIGN_OR_RETURN(auto re, CompiledRegex::compile(pattern));
  steps_.push_back(Step{std::move(re), behavior, invert, add_prefix_space});
  return Status::ok();
}

Result<PreTokenizer> PreTokenizer::from_regex(const std::string& pattern) {
  PreTokenizer p;
  DI_RETURN_IF_ERROR(p.add_regex_step(pattern, SplitBehavior::kIsolated, false, false));
  return p;
}

Result<PreTokenizer> PreTokenizer::from_gguf_pre(std::string_view pre) {
  PreTokenizer p;
  auto add = [&](const char* re) {
    return p.add_regex_step(re, SplitBehavior::kIsolated, false, false);
  };
  if (pre.empty() || pre == "default" || pre == "gpt2" || pre == "olmo") {
    DI_RETURN_IF_ERROR(add(kGpt2SplitRegex));
  } else if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell" ||
             pre == "exaone" || pre == "command-r") {
    // Digits one by one, then GPT-2 (SmolLM2's tokenizer.json: Digits + ByteLevel).
    DI_RETURN_IF_ERROR(add(R"(\p{N})"));
    DI_RETURN_IF_ERROR(add(kGpt2SplitRegex));
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "falcon3" ||
             pre == "dbrx" || pre == "smaug-bpe") {
    DI_RETURN_IF_ERROR(add(kLlama3Regex));
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    DI_RETURN_IF_ERROR(add(kQwen2Regex));
  } else if (pre == "deepseek-v3") {
    for (const char* re : kDeepseekV3Regexes) DI_RETURN_IF_ERROR(add(re));
  } else if (pre == "deepseek-llm") {
    for (const char* re : kDeepseekLlmRegexes) DI_RETURN_IF_ERROR(add(re));
  } else {
    return unsupported("GGUF tokenizer.ggml.pre '{}' is not a known pre-tokenizer", pre);
  }
  return p;
}

Status PreTokenizer::add_hf_step(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return invalid_argument("tokenizer.json: pre_tokenizer entry without a type");
  const std::string type = j["type"];
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return invalid_argument("tokenizer.json: Sequence pre_tokenizer without a list");
    for (const auto& sub : j["pretokenizers"]) DI_RETURN_IF_ERROR(add_hf_step(sub));
    return Status::ok();
  }
  if (type == "ByteLevel") {
    bool prefix = j.value("add_prefix_space", false);
    bool use_regex = j.value("use_regex", true);
    if (use_regex) return add_regex_step(kGpt2SplitRegex, SplitBehavior::kIsolated, false, prefix);
    if (prefix) return add_regex_step("(?!)", SplitBehavior::kIsolated, false, true);
    return Status::ok();
  }
  if (type == "Digits") {
    const char* re = j.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)";
    return add_regex_step(re, SplitBehavior::kIsolated, false, false);
  }
  if (type == "Split") {
    if (!j.contains("pattern") || !j["pattern"].is_object())
      return invalid_argument("tokenizer.json: Split pre_tokenizer without a pattern");
    const auto& pat = j["pattern"];
    std::string regex;
    if (pat.contains("Regex") && pat["Regex"].is_string()) {
      regex = pat["Regex"];
    } else if (pat.contains("String") && pat["String"].is_string()) {
      regex = escape_literal(pat["String"].get<std::string>());
    } else {
      return invalid_argument("tokenizer.json: Split pattern is neither Regex nor String");
    }
    DI_ASSIGN_OR_RETURN(auto behavior, parse_behavior(j.value("behavior", "Isolated")));
    return add_regex_step(regex, behavior, j.value("invert", false), false);
  }
  return unsupported("tokenizer.json: pre_tokenizer type '{}' is not supported", type);
}

Result<PreTokenizer> PreTokenizer::from_hf_json(const nlohmann::json& j) {
  PreTokenizer p;
  if (j.is_null()) return p;
  DI_RETURN_IF_ERROR(p.add_hf_step(j));
  return p;
}

void PreTokenizer::apply_step(const Step& step, std::string_view piece,
                              std::deque<std::string>* arena,
                              std::vector<std::string_view>* out) const {
  if (piece.empty()) return;
  if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
    arena->push_back(" ");
    arena->back().append(piece);
    piece = arena->back();
  }
  // Spans covering the piece: (begin, end, is_match), in order.
  struct Span { size_t b, e; bool match; };
  std::vector<Span> spans;
  size_t last = 0;
  step.regex->for_each_match(piece, [&](size_t b, size_t e) {
    if (b > last) spans.push_back({last, b, step.invert});
    spans.push_back({b, e, !step.invert});
    last = e;
  });
  if (last < piece.size()) spans.push_back({last, piece.size(), step.invert});

  auto emit = [&](size_t b, size_t e) {
    if (e > b) out->push_back(piece.substr(b, e - b));
  };
  switch (step.behavior) {
    case SplitBehavior::kIsolated:
      for (const Span& s : spans) emit(s.b, s.e);
      break;
    case SplitBehavior::kRemoved:
      for (const Span& s : spans)
        if (!s.match) emit(s.b, s.e);
      break;
    case SplitBehavior::kContiguous: {
      size_t i = 0;
      while (i < spans.size()) {
        size_t j = i + 1;
        if (spans[i].match)
          while (j < spans.size() && spans[j].match) ++j;
        emit(spans[i].b, spans[j - 1].e);
        i = j;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      size_t start = 0;
      for (const Span& s : spans) {
        if (s.match) {
          emit(start, s.e);
          start = s.e;
        }
      }
      emit(start, piece.size());
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      size_t start = 0;
      for (const Span& s : spans) {
        if (s.match && s.b > start) {
          emit(start, s.b);
          start = s.b;
        }
      }
      emit(start, piece.size());
      break;
    }
  }
}

void PreTokenizer::split(std::string_view text, std::deque<std::string>* arena,
                         std::vector<std::string_view>* out) const {
  if (steps_.empty()) {
    if (!text.empty()) out->push_back(text);
    return;
  }
  std::vector<std::string_view> cur{text}, next;
  for (size_t k = 0; k < steps_.size(); ++k) {
    std::vector<std::string_view>* dst = (k + 1 == steps_.size()) ? out : &next;
    for (std::string_view piece : cur) apply_step(steps_[k], piece, arena, dst);
    if (dst == &next) {
      cur.swap(next);
      next.clear();
    }
  }
}

}  // namespace deepinfer::recipe
