#include "deepinfer/serve/openai_common.h"

namespace deepinfer::serve {

using nlohmann::json;

const char* openai_finish_reason(engine::FinishReason r) {
  if (r == engine::FinishReason::kGrammarDeadEnd) return "grammar_dead_end";
  if (r == engine::FinishReason::kAbort) return "abort";  // cut by the server's stop
  return r == engine::FinishReason::kLength ? "length" : "stop";
}

json openai_usage(int prompt_tokens, int completion_tokens, int cached_tokens,
                  int replayed_tokens) {
  json details = {{"cached_tokens", cached_tokens}};
  if (replayed_tokens > 0) details["replayed_tokens"] = replayed_tokens;
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", details}};
}

namespace {
json token_bytes_json(const std::string& bytes) {
  json arr = json::array();
  for (unsigned char c : bytes) arr.push_back(int(c));
  return arr;
}
}  // namespace

json chat_logprobs(const recipe::Tokenizer& tok, const std::vector<engine::LogprobEntry>& entries) {
  json content = json::array();
  for (const engine::LogprobEntry& e : entries) {
    const std::string& bytes = tok.token_bytes(e.token_id);
    json top = json::array();
    for (const auto& [id, lp] : e.top) {
      const std::string& b = tok.token_bytes(id);
      top.push_back({{"token", b}, {"logprob", lp}, {"bytes", token_bytes_json(b)}});
    }
    content.push_back({{"token", bytes}, {"logprob", e.logprob}, {"bytes", token_bytes_json(bytes)}, {"top_logprobs", top}});
  }
  return content;
}

json completion_logprobs(const recipe::Tokenizer& tok, const std::vector<engine::LogprobEntry>& entries,
                         size_t offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const engine::LogprobEntry& e : entries) {
    const std::string& bytes = tok.token_bytes(e.token_id);
    tokens.push_back(bytes);
    lps.push_back(e.logprob);
    json top = json::object();
    for (const auto& [id, lp] : e.top) top[tok.token_bytes(id)] = lp;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += bytes.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

std::vector<engine::GenerationRequest> fan_out(const engine::GenerationRequest& base, int n) {
  std::vector<engine::GenerationRequest> out(size_t(std::max(n, 1)), base);
  for (size_t i = 0; i < out.size(); ++i)
    if (base.sampling.has_seed) out[i].sampling.seed = base.sampling.seed + i;
  return out;
}

}  // namespace deepinfer::serve
