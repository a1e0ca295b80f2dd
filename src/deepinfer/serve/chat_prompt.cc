#include "deepinfer/serve/chat_prompt.h"

#include "deepinfer/serve/api_error.h"
#include "deepinfer/serve/request_fields.h"
#include "deepinfer/serve/server_context.h"

namespace deepinfer::serve {

using nlohmann::json;

namespace {

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

json tools_as_openai_json(const std::vector<ToolSpec>& tools) {
  json arr = json::array();
  for (const ToolSpec& t : tools)
    arr.push_back({{"type", "function"},
                   {"function", {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}}}});
  return arr;
}

// For templates without tool support: the tools and the expected call format, in words.
std::string tool_instructions(const std::vector<ToolSpec>& tools) {
  std::string s =
      "You can call functions to help answer. The available functions, one JSON signature per "
      "line:\n";
  for (const ToolSpec& t : tools)
    s += json{{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}}.dump() + "\n";
  s += "To call a function, reply with one line per call in this exact form and nothing else:\n"
       "<tool_call>{\"name\": \"function name\", \"arguments\": {...}}</tool_call>\n"
       "Function results come back in messages from the tool role.";
  return s;
}

json forced_call_schema(const ChatTurn& turn) {
  json branches = json::array();
  for (const ToolSpec& t : turn.tools) {
    if (turn.tool_choice.mode == ToolChoice::kNamed && t.name != turn.tool_choice.name) continue;
    json params = t.parameters.is_object() && !t.parameters.empty() ? t.parameters : json{{"type", "object"}};
    branches.push_back({{"type", "object"},
                        {"properties", {{"name", {{"const", t.name}}}, {"arguments", params}}},
                        {"required", {"name", "arguments"}},
                        {"additionalProperties", false}});
  }
  if (branches.size() == 1) return branches[0];
  return {{"anyOf", branches}};
}

bool parse_call_json(const std::string& text, ToolCall& call) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return false;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  call.name = name->get<std::string>();
  if (args == j.end()) {
    call.arguments = "{}";
  } else if (args->is_string()) {
    call.arguments = args->get<std::string>();
  } else {
    call.arguments = args->dump();
  }
  call.id = make_id("call_");
  return true;
}

}  // namespace

bool tool_call_forced(const ChatTurn& turn) {
  return !turn.tools.empty() &&
         (turn.tool_choice.mode == ToolChoice::kRequired || turn.tool_choice.mode == ToolChoice::kNamed);
}

std::string tool_calls_as_text(const std::vector<ToolCall>& calls) {
  std::string s;
  for (const ToolCall& c : calls) {
    json args = json::parse(c.arguments, nullptr, false);
    json call = {{"name", c.name}, {"arguments", args.is_discarded() ? json(c.arguments) : args}};
    s += std::string(kCallOpen) + call.dump() + std::string(kCallClose) + "\n";
  }
  return s;
}

std::string tool_calls_as_json(const std::vector<ToolCall>& calls) {
  json arr = json::array();
  for (const ToolCall& c : calls) {
    json args = json::parse(c.arguments, nullptr, false);
    arr.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", args.is_discarded() ? json(c.arguments) : args}}}});
  }
  return arr.dump();
}

void encode_chat_turn(const recipe::Tokenizer& tok, const ChatTurn& turn, engine::GenerationRequest& request) {
  std::vector<recipe::ChatMessage> messages = turn.messages;
  recipe::ChatOptions options;
  const bool use_tools = !turn.tools.empty() && turn.tool_choice.mode != ToolChoice::kNone;
  if (turn.tool_choice.mode == ToolChoice::kNamed) {
    bool found = false;
    for (const ToolSpec& t : turn.tools) found |= t.name == turn.tool_choice.name;
    if (!found) bad_request("tool_choice", "tool_choice names '{}', which is not among the tools", turn.tool_choice.name);
  }
  if (use_tools && recipe::chat_template_renders_tools(tok)) {
    options.tools_json = tools_as_openai_json(turn.tools).dump();
  } else {
    // Without template support, tool traffic becomes text the model can read.
    for (recipe::ChatMessage& m : messages) {
      if (!m.tool_calls_json.empty()) {
        json calls = json::parse(m.tool_calls_json, nullptr, false);
        std::vector<ToolCall> parsed;
        if (calls.is_array())
          for (const json& c : calls) {
            ToolCall tc;
            tc.name = c.value("function", json::object()).value("name", "");
            const json args = c.value("function", json::object()).value("arguments", json::object());
            tc.arguments = args.is_string() ? args.get<std::string>() : args.dump();
            parsed.push_back(tc);
          }
        m.content += (m.content.empty() ? "" : "\n") + tool_calls_as_text(parsed);
        m.tool_calls_json.clear();
      }
      if (m.role == "tool") m.content = "<tool_response>" + m.content + "</tool_response>";
    }
    if (use_tools) {
      const std::string text = tool_instructions(turn.tools);
      if (!messages.empty() && messages[0].role == "system")
        messages[0].content += "\n\n" + text;
      else
        messages.insert(messages.begin(), recipe::ChatMessage{"system", text});
    }
  }
  auto ids = recipe::encode_chat(tok, messages, options);
  if (!ids.is_ok()) bad_request("messages", "the conversation cannot be encoded: {}", ids.status().message());
  request.prompt_ids = std::move(ids).value();
  if (tool_call_forced(turn)) request.grammar = json_schema_grammar(forced_call_schema(turn), true);
}

ParsedChatOutput parse_chat_output(const ChatTurn& turn, const std::string& text) {
  ParsedChatOutput out;
  if (turn.tools.empty() || turn.tool_choice.mode == ToolChoice::kNone) {
    out.content = text;
    return out;
  }
  if (tool_call_forced(turn)) {
    ToolCall call;
    if (parse_call_json(text, call)) {
      out.tool_calls.push_back(call);
    } else {
      out.content = text;  // cut by max_tokens: not a complete call
    }
    return out;
  }
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find(kCallOpen, pos);
    if (open == std::string::npos) {
      out.content += text.substr(pos);
      break;
    }
    const size_t body = open + kCallOpen.size();
    const size_t close = text.find(kCallClose, body);
    ToolCall call;
    const std::string inner = text.substr(body, close == std::string::npos ? std::string::npos : close - body);
    if (close == std::string::npos || !parse_call_json(inner, call)) {
      out.content += text.substr(pos);
      break;
    }
    out.content += text.substr(pos, open - pos);
    out.tool_calls.push_back(call);
    pos = close + kCallClose.size();
  }
  // Whitespace between calls is not content.
  if (!out.tool_calls.empty() && out.content.find_first_not_of(" \n\r\t") == std::string::npos)
    out.content.clear();
  return out;
}

size_t streamable_content_length(const ChatTurn& turn, const std::string& text) {
  if (turn.tools.empty() || turn.tool_choice.mode == ToolChoice::kNone) return text.size();
  if (tool_call_forced(turn)) return 0;
  const size_t open = text.find(kCallOpen);
  if (open != std::string::npos) return open;
  // Hold back a tail that could be the start of "<tool_call>".
  for (size_t keep = std::min(text.size(), kCallOpen.size() - 1); keep > 0; --keep)
    if (text.compare(text.size() - keep, keep, kCallOpen.substr(0, keep)) == 0) return text.size() - keep;
  return text.size();
}

}  // namespace deepinfer::serve
