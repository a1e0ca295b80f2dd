// Tool-call values shared by the chat encoders and the output parsers, and JSON text written
// the way Python's json.dumps writes it (what chat templates and reference servers produce).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::recipe {

// One function call the model made (or an assistant turn in the history made).
struct ToolCall {
  std::string id;              // "call_..." when the parser assigns it
  std::string name;
  std::string arguments_json;  // a JSON object, as text
  bool operator==(const ToolCall&) const = default;
};

// json.dumps(value) with ", " and ": " separators, keys in stored order; ensure_ascii escapes
// every non-ASCII character as \uXXXX (Python's default), else UTF-8 is kept.
std::string python_json_dumps(const nlohmann::ordered_json& value, bool ensure_ascii);

// Deepest bracket nesting of JSON text (outside strings), found without recursion: callers
// refuse text nested deeper than kMaxJsonDepth before parsing and re-printing it recursively.
size_t json_nesting_depth(std::string_view text);
inline constexpr size_t kMaxJsonDepth = 128;

// Parsers of one call's text, as models write them (nullopt when malformed). Ids are left empty.
// DeepSeek: the text between <｜tool▁call▁begin｜> and <｜tool▁call▁end｜>, either V3.1's
// "name<｜tool▁sep｜>{args}" or V3's "function<｜tool▁sep｜>name\n```json\n{args}\n```".
std::optional<ToolCall> parse_deepseek_tool_call(std::string_view body);
// A JSON object {"name": ..., "arguments"|"parameters": {...} or "<json text>"} (Hermes/Qwen
// <tool_call> bodies, Llama 3.1 JSON calls).
std::optional<ToolCall> parse_json_tool_call(std::string_view text);
// One or more such objects: a JSON array of them, or objects separated by whitespace or ';'
// (Llama 3.1 puts several calls on one line that way).
std::optional<std::vector<ToolCall>> parse_json_tool_calls(std::string_view text);

// A tool-call id in OpenAI's shape: "call_" + 24 alphanumerics from a process-wide counter
// mixed with a random seed (unique, not secret).
std::string make_tool_call_id();

}  // namespace deepinfer::recipe
