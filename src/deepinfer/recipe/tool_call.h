// Tool-call values shared by the chat encoders and the output parsers, and JSON text written
// the way Python's json.dumps writes it (what chat templates and reference servers produce).
#pragma once

#include <string>

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

// A tool-call id in OpenAI's shape: "call_" + 24 alphanumerics from a process-wide counter
// mixed with a random seed (unique, not secret).
std::string make_tool_call_id();

}  // namespace deepinfer::recipe
