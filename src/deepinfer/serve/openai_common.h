// Pieces the OpenAI-style handlers share: usage objects, logprob objects, finish reasons.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/engine/request.h"
#include "deepinfer/recipe/tokenizer.h"
#include "deepinfer/serve/server_context.h"

namespace deepinfer::serve {

// "stop" | "length" (an aborted request, e.g. shutdown, reports "stop" with what it has).
const char* openai_finish_reason(engine::FinishReason r);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}};
// "replayed_tokens" (of the cached ones, computed again by a bounded sliding-window replay) in
// prompt_tokens_details when there were any.
nlohmann::json openai_usage(int prompt_tokens, int completion_tokens, int cached_tokens,
                            int replayed_tokens = 0);

// Chat Completions logprobs.content entries for `entries`.
nlohmann::json chat_logprobs(const recipe::Tokenizer& tok, const std::vector<engine::LogprobEntry>& entries);
// Completions logprobs {"tokens", "token_logprobs", "top_logprobs", "text_offset"}; `offset`
// is the text length before these tokens.
nlohmann::json completion_logprobs(const recipe::Tokenizer& tok, const std::vector<engine::LogprobEntry>& entries,
                                   size_t offset);

// The requests for `n` choices: copies of `base`, choice i seeded with seed + i when a seed is set.
std::vector<engine::GenerationRequest> fan_out(const engine::GenerationRequest& base, int n);

}  // namespace deepinfer::serve
