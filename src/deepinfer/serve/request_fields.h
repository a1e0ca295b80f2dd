// Request fields every API family shares, read into a GenerationRequest: sampling settings,
// stop strings, logit bias, output formats (JSON Schema -> grammar). Errors are ApiError 400s
// naming the field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "deepinfer/engine/request.h"

namespace deepinfer::serve {

// The HTTP fields of engine/sampling_fields.h (temperature, top_p, top_k, min_p, seed, the
// penalties, ignore_eos): the same names in all three APIs, OpenAI's ranges; absent fields keep
// the request's defaults (engine::Defaults::kApi).
void read_sampling(const nlohmann::json& body, engine::GenerationRequest& r);
// The KV store traffic class: body field "traffic_class" ("agent" | "chat"), else the
// X-Traffic-Class header (`header_value`, empty when absent), else the server's default.
// DeepSeek-V4 models' sliding-window restore: body field "swa_restore" ("bounded" | "exact").
void read_swa_restore(const nlohmann::json& body, engine::GenerationRequest& r);
void read_traffic_class(const nlohmann::json& body, const std::string& header_value,
                        engine::GenerationRequest& r);
// `key` as a string or a list of strings (OpenAI "stop", Anthropic "stop_sequences").
void read_stop(const nlohmann::json& body, const char* key, engine::GenerationRequest& r);
// OpenAI logit_bias: {"token id": bias in [-100, 100]}.
void read_logit_bias(const nlohmann::json& body, int32_t vocab_size, engine::GenerationRequest& r);
// Max output tokens from the first present of `keys`; `fallback` when none is present.
int read_max_tokens(const nlohmann::json& body, std::initializer_list<const char*> keys, int fallback);

// A JSON Schema object -> grammar spec (compiled by the engine; errors come back through it).
structured::GrammarSpec json_schema_grammar(const nlohmann::json& schema, bool strict);
structured::GrammarSpec any_json_grammar();

// OpenAI chat "response_format" / Responses "text.format" (same shapes, except that Responses
// puts name/schema/strict at the top level of the format object).
void read_response_format(const nlohmann::json& format, const std::string& param, bool responses_style,
                          engine::GenerationRequest& r);

}  // namespace deepinfer::serve
