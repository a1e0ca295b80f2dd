// DeepSeek-V4's chat encoding, written natively after the rules of DeepSeek's
// encoding/encoding_dsv4.py (V4 ships no Jinja template): BOS, system prompt (+ a "## Tools"
// section), <｜User｜>...<｜Assistant｜> then <think> (thinking mode) or </think> (chat mode),
// assistant turns as reasoning</think> + content + a DSML tool-call block + EOS, and tool
// results as <tool_result>...</tool_result> inside user turns. Only the format's own markers
// become control tokens; every message text, name and argument is encoded as plain text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/recipe/chat.h"
#include "deepinfer/recipe/jinja_value.h"
#include "deepinfer/recipe/output_parser.h"
#include "deepinfer/recipe/tool_call.h"

namespace deepinfer::recipe {

class Tokenizer;

// DeepSeek's reasoning effort levels: kHigh renders like no level at all; kMax puts DeepSeek's
// "Reasoning Effort: Absolute maximum ..." preamble before the first message (thinking only).
enum class DeepseekV4Effort { kDefault, kHigh, kMax };

struct DeepseekV4ChatOptions {
  bool thinking = false;  // thinking mode (<think>) or chat mode (</think>)
  DeepseekV4Effort effort = DeepseekV4Effort::kDefault;
  // OpenAI-style tools array ([{"type":"function","function":{...}}], or the inner objects);
  // described in the first system message (one is added when there is none). Empty = none.
  // With tools, reasoning of earlier turns is kept and every user turn opens <think> in
  // thinking mode (encoding_dsv4.py's drop_thinking=False).
  std::string tools_json;
  // Earlier turns lose their reasoning (everything before the last user turn); false keeps it.
  bool drop_thinking = true;
};

// The chat as text with the byte ranges that are format markers (trusted). Roles: system,
// developer (a user turn, as DeepSeek defines it), user, assistant (content, reasoning_content,
// tool_calls_json: an OpenAI array whose "arguments" is a JSON string or object) and tool
// (tool_call_id; consecutive user/tool messages merge into one user turn, results in the order
// of the calls). Bad roles or JSON are invalid_argument.
Result<jinja::TaggedString> render_deepseek_v4_chat(const std::vector<ChatMessage>& messages,
                                                    const DeepseekV4ChatOptions& options);

// render_deepseek_v4_chat, tokenized: markers as control ids, message text as plain text even
// where it spells a marker.
Result<std::vector<int32_t>> encode_deepseek_v4_chat(const Tokenizer& tok,
                                                     const std::vector<ChatMessage>& messages,
                                                     const DeepseekV4ChatOptions& options);

// The "## Tools" system-prompt section for `tools_json` (empty when there are none).
Result<jinja::TaggedString> deepseek_v4_tools_prompt(const std::string& tools_json);

// The recipe picks the V4 encoding for a model whose config.json says model_type deepseek_v4 or
// deepseek_v41 (V4.1 keeps V4's tokenizer and encoding).
bool uses_deepseek_v4_chat(std::string_view architecture);

// An API reasoning effort -> thinking on/off and DeepSeek's level: none / minimal switch
// thinking off; low, medium, high think at kHigh; xhigh and max at kMax. nullopt: unknown value.
struct DeepseekV4EffortChoice {
  bool thinking = false;
  DeepseekV4Effort effort = DeepseekV4Effort::kDefault;
};
std::optional<DeepseekV4EffortChoice> deepseek_v4_effort_from_api(std::string_view effort);

// How to read the model's reply: reasoning up to </think> (from the start in thinking mode),
// DSML tool calls when tools were offered.
OutputParserOptions deepseek_v4_output_parser_options(bool tools, bool thinking);

// One DSML call as the model writes it, from just after "<｜DSML｜invoke" up to its
// "</｜DSML｜invoke>": ` name="NAME">` then parameters
// `<｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>` separated by
// whitespace. string="false" values are JSON (kept as a string when they do not parse).
// nullopt when malformed (duplicate names, stray text, bad attributes). Id left empty.
std::optional<ToolCall> parse_dsml_invoke(std::string_view body);

}  // namespace deepinfer::recipe
