// DeepSeek chat encoding (see deepseek_chat.h). The per-style rules follow DeepSeek's published
// chat templates for V3-0324, R1 and V3.1; tool definitions follow the V3.1 model card's
// "## Tools" system-prompt layout.
#include "deepinfer/recipe/deepseek_chat.h"

#include <nlohmann/json.hpp>

#include "deepinfer/recipe/tokenizer.h"
#include "deepinfer/recipe/tool_call.h"

namespace deepinfer::recipe {
namespace {

using jinja::TaggedString;
using ojson = nlohmann::ordered_json;

constexpr const char* kBos = "<｜begin▁of▁sentence｜>";
constexpr const char* kEos = "<｜end▁of▁sentence｜>";
constexpr const char* kUser = "<｜User｜>";
constexpr const char* kAssistant = "<｜Assistant｜>";
constexpr const char* kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr const char* kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr const char* kCallBegin = "<｜tool▁call▁begin｜>";
constexpr const char* kCallEnd = "<｜tool▁call▁end｜>";
constexpr const char* kSep = "<｜tool▁sep｜>";
constexpr const char* kOutputsBegin = "<｜tool▁outputs▁begin｜>";
constexpr const char* kOutputsEnd = "<｜tool▁outputs▁end｜>";
constexpr const char* kOutputBegin = "<｜tool▁output▁begin｜>";
constexpr const char* kOutputEnd = "<｜tool▁output▁end｜>";

struct Out {
  TaggedString t;
  void lit(const std::string& s) { t.append(TaggedString::literal(s)); }
  void data(const std::string& s) { t.append(TaggedString::data(s)); }
};

// Arguments as the template sees them: a JSON string is used as written; an object (some
// clients send one) is written as json.dumps would.
Result<std::vector<ToolCall>> parse_calls(const std::string& calls_json, size_t index) {
  std::vector<ToolCall> calls;
  if (calls_json.empty()) return calls;
  if (json_nesting_depth(calls_json) > kMaxJsonDepth)
    return invalid_argument("messages[{}].tool_calls is nested deeper than {}", index, kMaxJsonDepth);
  ojson j = ojson::parse(calls_json, nullptr, false);
  if (j.is_discarded() || !j.is_array())
    return invalid_argument("messages[{}].tool_calls is not a JSON array", index);
  for (size_t k = 0; k < j.size(); ++k) {
    const ojson& c = j[k];
    const ojson& f = c.is_object() && c.contains("function") ? c["function"] : c;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
      return invalid_argument("messages[{}].tool_calls[{}] has no function name", index, k);
    ToolCall call;
    call.name = f["name"].get<std::string>();
    if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
    const ojson args = f.contains("arguments") ? f["arguments"] : ojson::object();
    call.arguments_json = args.is_string() ? args.get<std::string>() : python_json_dumps(args, true);
    calls.push_back(std::move(call));
  }
  return calls;
}

// Text after the reasoning: R1 keeps what follows the last </think>, V3.1 the first.
std::string drop_reasoning(const std::string& content, bool last) {
  const size_t p = last ? content.rfind("</think>") : content.find("</think>");
  return p == std::string::npos ? content : content.substr(p + 8);
}

void append_v3_call(Out& o, const ToolCall& c, bool first) {
  if (!first) o.lit("\n");
  o.lit(std::string(kCallBegin) + "function" + kSep);
  o.data(c.name);
  o.lit("\n```json\n");
  o.data(c.arguments_json);
  o.lit(std::string("\n```") + kCallEnd);
}

void append_v31_call(Out& o, const ToolCall& c) {
  o.lit(kCallBegin);
  o.data(c.name);
  o.lit(kSep);
  o.data(c.arguments_json);
  o.lit(kCallEnd);
}

}  // namespace

Result<TaggedString> deepseek_tools_prompt(const std::string& tools_json, DeepseekChatStyle style) {
  Out o;
  if (tools_json.empty()) return o.t;
  if (json_nesting_depth(tools_json) > kMaxJsonDepth)
    return invalid_argument("tools is nested deeper than {}", kMaxJsonDepth);
  ojson tools = ojson::parse(tools_json, nullptr, false);
  if (tools.is_discarded() || !tools.is_array()) return invalid_argument("tools is not a JSON array");
  if (tools.empty()) return o.t;
  o.lit("## Tools\nYou have access to the following tools:\n");
  for (size_t k = 0; k < tools.size(); ++k) {
    const ojson& t = tools[k];
    const ojson& f = t.is_object() && t.contains("function") ? t["function"] : t;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
      return invalid_argument("tools[{}] has no function name", k);
    o.lit("\n### ");
    o.data(f["name"].get<std::string>());
    o.lit("\nDescription: ");
    if (f.contains("description") && f["description"].is_string()) o.data(f["description"].get<std::string>());
    o.lit("\n\nParameters: ");
    o.data(python_json_dumps(f.contains("parameters") ? f["parameters"] : ojson::object(), true));
    o.lit("\n");
  }
  o.lit("\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n");
  if (style == DeepseekChatStyle::kV31) {
    o.lit(std::string(kCallsBegin) + kCallBegin + "tool_call_name" + kSep + "tool_call_arguments" +
          kCallEnd + "{{additional_tool_calls}}" + kCallsEnd + "\n\n");
  } else {
    o.lit(std::string(kCallsBegin) + kCallBegin + "function" + kSep +
          "tool_call_name\n```json\ntool_call_arguments\n```" + kCallEnd +
          "{{additional_tool_calls}}" + kCallsEnd + "\n\n");
  }
  o.lit("Where:\n\n- `tool_call_name` must be an exact match to one of the available tools\n"
        "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters "
        "Schema\n");
  o.lit(style == DeepseekChatStyle::kV31
            ? "- For multiple tool calls, chain them directly without separators or spaces\n"
            : "- For multiple tool calls, put each on its own line\n");
  return o.t;
}

Result<TaggedString> render_deepseek_chat(const std::vector<ChatMessage>& messages,
                                          const DeepseekChatOptions& options) {
  const DeepseekChatStyle style = options.style;
  const bool v31 = style == DeepseekChatStyle::kV31, r1 = style == DeepseekChatStyle::kR1;
  Out o;
  o.lit(kBos);
  // All system messages, joined by a blank line, go first; then the tool descriptions.
  bool have_system = false;
  // OpenAI's "developer" role is a system message by another name.
  auto is_system = [](const ChatMessage& m) { return m.role == "system" || m.role == "developer"; };
  for (const auto& m : messages) {
    if (!is_system(m)) continue;
    if (have_system) o.lit("\n\n");
    o.data(m.content);
    have_system = true;
  }
  DI_ASSIGN_OR_RETURN(TaggedString tools, deepseek_tools_prompt(options.tools_json, style));
  if (!tools.text.empty()) {
    if (have_system) o.lit("\n\n");
    o.t.append(tools);
  }

  bool last_user = false, in_tool = false, first_output = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (is_system(m)) continue;
    if (m.role == "user") {
      in_tool = false;
      last_user = true;
      o.lit(kUser);
      o.data(m.content);
      if (style == DeepseekChatStyle::kV3) o.lit(kAssistant);
    } else if (m.role == "assistant") {
      DI_ASSIGN_OR_RETURN(auto calls, parse_calls(m.tool_calls_json, i));
      if (v31) {
        if (last_user) o.lit(std::string(kAssistant) + "</think>");
        if (!calls.empty()) {
          o.data(m.content);
          o.lit(kCallsBegin);
          for (const auto& c : calls) append_v31_call(o, c);
          o.lit(std::string(kCallsEnd) + kEos);
        } else {
          o.data(in_tool ? m.content : drop_reasoning(m.content, /*last=*/false));
          o.lit(kEos);
        }
      } else if (!calls.empty()) {  // V3 / R1 tool calls
        if (in_tool) o.lit(kOutputsEnd);
        if (r1) o.lit(kAssistant);
        o.data(r1 ? drop_reasoning(m.content, /*last=*/true) : m.content);
        o.lit(kCallsBegin);
        for (size_t k = 0; k < calls.size(); ++k) append_v3_call(o, calls[k], k == 0);
        o.lit(std::string(kCallsEnd) + kEos);
        first_output = true;
      } else if (in_tool) {  // the answer after tool results continues the outputs block
        o.lit(kOutputsEnd);
        o.data(m.content);
        o.lit(kEos);
      } else {
        if (r1) o.lit(kAssistant);
        o.data(r1 ? drop_reasoning(m.content, /*last=*/true) : m.content);
        o.lit(kEos);
      }
      last_user = false;
      in_tool = false;
    } else if (m.role == "tool") {
      last_user = false;
      if (v31) {
        o.lit(kOutputBegin);
      } else if (first_output) {
        o.lit(std::string(kOutputsBegin) + kOutputBegin);
        first_output = false;
      } else {
        o.lit(std::string("\n") + kOutputBegin);
      }
      o.data(m.content);
      o.lit(kOutputEnd);
      in_tool = true;
    } else {
      return invalid_argument("messages[{}].role '{}' is not system, developer, user, assistant or tool", i,
                              m.role);
    }
  }
  if (in_tool && !v31) o.lit(kOutputsEnd);
  if (options.add_generation_prompt && !in_tool) {
    if (v31 && last_user) {
      o.lit(std::string(kAssistant) + (options.thinking ? "<think>" : "</think>"));
    } else if (r1) {
      o.lit(std::string(kAssistant) + (options.thinking ? "<think>\n" : ""));
    } else if (style == DeepseekChatStyle::kV3 && !last_user) {
      o.lit(kAssistant);
    }
  }
  return o.t;
}

Result<std::vector<int32_t>> encode_deepseek_chat(const Tokenizer& tok,
                                                  const std::vector<ChatMessage>& messages,
                                                  const DeepseekChatOptions& options) {
  for (const char* marker : {kBos, kEos, kUser, kAssistant})
    if (!tok.special_token_id(marker))
      return invalid_argument("DeepSeek chat format: the vocabulary has no control token {}", marker);
  DI_ASSIGN_OR_RETURN(TaggedString text, render_deepseek_chat(messages, options));
  return tok.encode_trusted(text.text, text.trusted);
}

std::optional<DeepseekChatStyle> deepseek_style_from_template(const std::string& t) {
  if (t.find(kUser) == std::string::npos || t.find(kAssistant) == std::string::npos)
    return std::nullopt;
  // V3.1 closes the (empty) reasoning right after the assistant marker; R1 strips reasoning
  // from earlier turns; V3 knows no reasoning.
  if (t.find("<｜Assistant｜></think>") != std::string::npos) return DeepseekChatStyle::kV31;
  if (t.find("</think>") != std::string::npos) return DeepseekChatStyle::kR1;
  return DeepseekChatStyle::kV3;
}

std::optional<DeepseekChatStyle> deepseek_style_for(const Tokenizer& tok) {
  if (!tok.chat_template().empty()) return deepseek_style_from_template(tok.chat_template());
  if (tok.special_token_id(kUser) && tok.special_token_id(kAssistant) && tok.special_token_id(kBos))
    return DeepseekChatStyle::kV31;
  return std::nullopt;
}

}  // namespace deepinfer::recipe
