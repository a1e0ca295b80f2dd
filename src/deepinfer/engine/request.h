// What a caller asks the engine for and what it gets back, as plain values. Every API surface
// (CLI, HTTP handlers, Python) converts to and from these.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/structured/structured.h"
#include "deepinfer/engine/prompt_images.h"
#include "deepinfer/engine/sampling_params.h"
#include "deepinfer/engine/sequence.h"

namespace deepinfer::engine {

// How a DeepSeek-V4-style model restores the sliding-window state of a cached prefix whose
// window rows are gone: bounded (replay its last window of tokens, the window cut there:
// constant cost, approximate) or exact (only prefixes whose rows are still held: same tokens
// and logprobs as computing the whole prefix). Other models ignore it.
enum class SwaRestore { kBounded, kExact };
// "bounded" | "exact"; nullopt otherwise.
inline std::optional<SwaRestore> swa_restore_from_name(std::string_view name) {
  if (name == "bounded") return SwaRestore::kBounded;
  if (name == "exact") return SwaRestore::kExact;
  return std::nullopt;
}

struct GenerationRequest {
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
  // Most tokens to generate. The engine clamps it to what the model's context leaves after the
  // prompt: the one place that limits it, so a caller passes what the user asked for, or
  // kUntilContextEnd for "as many as fit".
  int max_tokens = 256;
  static constexpr int kUntilContextEnd = std::numeric_limits<int>::max();
  std::vector<std::string> stop;  // stop strings (not included in the output text)
  bool ignore_eos = false;
  // Structured output: the text must match this grammar (JSON Schema, any JSON, regex, EBNF).
  std::optional<structured::GrammarSpec> grammar;
  // KV store lifetime class of this request's prefix blocks (agent: 3 days, chat: 7 by
  // default); unset = the engine's default_traffic_class.
  std::optional<kvstore::TrafficClass> traffic_class;
  // Prompt logprobs (OpenAI Completions' echo with logprobs): the logprob of each prompt token
  // after the first, with the N most likely tokens there; -1 = off, 0..20 = N. Such a request
  // computes its whole prompt (a cached prefix has no logits).
  int prompt_logprobs = -1;
  // Unset = the engine's default_swa_restore.
  std::optional<SwaRestore> swa_restore;
  // Speculative decoding (when the engine has a drafter): false opts this request out. Its
  // output is the same either way; only the speed differs.
  bool speculative = true;
  // Multimodal prompts: the images' placeholder positions and their input embeddings. Prefix
  // cache keys of blocks holding image positions cover the image hashes (image_block_keys.h).
  std::vector<PromptImage> images;
  // Prefill/decode disaggregation: non-empty = once the prompt is computed, the engine hands
  // its full prompt blocks to its KvExportSink (kv_export.h) under this tag (a prefill engine
  // sends them to the decode engine that continues the request).
  std::string kv_export_tag;
};

struct LogprobEntry {
  int32_t token_id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // the N most likely tokens at this step
};

// One update for one request: the tokens and text produced since the previous update.
struct RequestOutput {
  int64_t request_id = 0;
  std::vector<int32_t> new_token_ids;
  std::string new_text;
  std::vector<LogprobEntry> new_logprobs;  // one per new token when logprobs were asked for
  // With GenerationRequest::prompt_logprobs: prompt tokens 1.. (the first has none), all in
  // the output that carries the first generated token.
  std::vector<LogprobEntry> prompt_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;  // set when the request failed (finish_reason kAbort or kGrammarDeadEnd)
  // prompt_tokens and cached_tokens are set on every output once the prompt is scheduled
  // (its prefix-cache lookup done); completion_tokens on the final output.
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
  int replayed_tokens = 0;  // of cached_tokens, recomputed by a bounded replay (swa_restore)
};

}  // namespace deepinfer::engine
