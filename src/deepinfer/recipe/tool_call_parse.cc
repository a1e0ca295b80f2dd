// Parsing one tool call's text in the DeepSeek and JSON (Hermes, Llama 3.1) shapes.
#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "deepinfer/recipe/tool_call.h"

namespace deepinfer::recipe {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kSep = "<｜tool▁sep｜>";

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

namespace {

// Arguments must be a JSON object; returned as the model wrote them when they already are
// valid JSON text (keeps its spacing), or dumped when given as a parsed object.
std::optional<std::string> object_text(std::string_view text) {
  text = trim(text);
  if (json_nesting_depth(text) > kMaxJsonDepth) return std::nullopt;
  ojson j = ojson::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return std::string(text);
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name)
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ' || c == '<' || c == '>') return false;
  return true;
}

}  // namespace

std::optional<ToolCall> parse_deepseek_tool_call(std::string_view body) {
  const size_t sep = body.find(kSep);
  if (sep == std::string_view::npos) return std::nullopt;
  std::string_view left = trim(body.substr(0, sep)), right = body.substr(sep + kSep.size());
  ToolCall call;
  if (left == "function") {  // V3: name on the first line, arguments in a ```json fence
    const size_t nl = right.find('\n');
    if (nl == std::string_view::npos) return std::nullopt;
    call.name = std::string(trim(right.substr(0, nl)));
    std::string_view args = trim(right.substr(nl + 1));
    if (args.starts_with("```")) {
      const size_t first_nl = args.find('\n');
      if (first_nl == std::string_view::npos) return std::nullopt;
      args = args.substr(first_nl + 1);
      if (!args.ends_with("```")) return std::nullopt;
      args.remove_suffix(3);
    }
    auto text = object_text(args);
    if (!text) return std::nullopt;
    call.arguments_json = std::move(*text);
  } else {  // V3.1: name<｜tool▁sep｜>{args}
    call.name = std::string(left);
    auto text = object_text(right);
    if (!text) return std::nullopt;
    call.arguments_json = std::move(*text);
  }
  if (!valid_name(call.name)) return std::nullopt;
  return call;
}

namespace {

std::optional<ToolCall> call_from_json(const ojson& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall call;
  call.name = j["name"].get<std::string>();
  if (!valid_name(call.name)) return std::nullopt;
  const char* key = j.contains("arguments") ? "arguments" : j.contains("parameters") ? "parameters" : nullptr;
  if (!key) {
    call.arguments_json = "{}";
    return call;
  }
  const ojson& a = j[key];
  if (a.is_object()) {
    call.arguments_json = python_json_dumps(a, /*ensure_ascii=*/false);
  } else if (a.is_string()) {  // some models double-encode the arguments
    auto text = object_text(a.get_ref<const std::string&>());
    if (!text) return std::nullopt;
    call.arguments_json = std::move(*text);
  } else {
    return std::nullopt;
  }
  return call;
}

}  // namespace

std::optional<ToolCall> parse_json_tool_call(std::string_view text) {
  text = trim(text);
  if (json_nesting_depth(text) > kMaxJsonDepth) return std::nullopt;
  ojson j = ojson::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return call_from_json(j);
}

std::optional<std::vector<ToolCall>> parse_json_tool_calls(std::string_view text) {
  text = trim(text);
  std::vector<ToolCall> calls;
  if (json_nesting_depth(text) > kMaxJsonDepth) return std::nullopt;
  if (text.starts_with("[")) {
    ojson j = ojson::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_array() || j.empty()) return std::nullopt;
    for (const auto& x : j) {
      auto c = call_from_json(x);
      if (!c) return std::nullopt;
      calls.push_back(std::move(*c));
    }
    return calls;
  }
  // Objects one after another: find each object's end by bracket depth outside strings.
  size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && (text[pos] == ';' || std::isspace(static_cast<unsigned char>(text[pos])))) ++pos;
    if (pos >= text.size()) break;
    if (text[pos] != '{') return std::nullopt;
    int depth = 0;
    bool in_string = false, escaped = false;
    size_t end = pos;
    for (; end < text.size(); ++end) {
      const char c = text[end];
      if (in_string) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        break;
      }
    }
    if (end >= text.size()) return std::nullopt;
    auto c = parse_json_tool_call(text.substr(pos, end + 1 - pos));
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
    pos = end + 1;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace deepinfer::recipe
