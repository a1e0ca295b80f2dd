// DSML tool calls as DeepSeek-V4 writes them (see parse_dsml_invoke in deepseek_v4_chat.h).
#include <nlohmann/json.hpp>

#include "deepinfer/recipe/deepseek_v4_chat.h"

namespace deepinfer::recipe {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kParamOpen = "<｜DSML｜parameter";
constexpr std::string_view kParamClose = "</｜DSML｜parameter>";

void skip_ws(std::string_view& s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
}

bool eat(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Text up to `end` (consumed); nullopt when `end` never comes.
std::optional<std::string_view> until(std::string_view& s, std::string_view end) {
  const size_t p = s.find(end);
  if (p == std::string_view::npos) return std::nullopt;
  std::string_view out = s.substr(0, p);
  s.remove_prefix(p + end.size());
  return out;
}

// A string="false" value: JSON when it parses (not too deep to re-print), else the raw text.
ojson json_value(std::string_view text) {
  if (json_nesting_depth(text) <= kMaxJsonDepth) {
    ojson v = ojson::parse(text, nullptr, false);
    if (!v.is_discarded()) return v;
  }
  return ojson(std::string(text));
}

}  // namespace

std::optional<ToolCall> parse_dsml_invoke(std::string_view s) {
  skip_ws(s);
  if (!eat(s, "name=\"")) return std::nullopt;
  auto name = until(s, "\">");
  if (!name || name->empty()) return std::nullopt;
  ojson args = ojson::object();
  while (true) {
    skip_ws(s);
    if (s.empty()) break;
    if (!eat(s, kParamOpen) || !eat(s, " name=\"")) return std::nullopt;
    auto key = until(s, "\" string=\"");
    if (!key) return std::nullopt;
    bool is_string = true;
    if (eat(s, "true\">")) {
      is_string = true;
    } else if (eat(s, "false\">")) {
      is_string = false;
    } else {
      return std::nullopt;
    }
    auto value = until(s, kParamClose);
    if (!value) return std::nullopt;
    const std::string k(*key);
    if (args.contains(k)) return std::nullopt;  // a duplicate parameter: DeepSeek rejects the call
    args[k] = is_string ? ojson(std::string(*value)) : json_value(*value);
  }
  ToolCall call;
  call.name = std::string(*name);
  call.arguments_json = python_json_dumps(args, false);
  return call;
}

}  // namespace deepinfer::recipe
