#include "deepinfer/serve/chat_prompt.h"

#include "deepinfer/recipe/deepseek_chat.h"
#include "deepinfer/recipe/deepseek_v4_chat.h"
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
    call.arguments_json = "{}";
  } else if (args->is_string()) {
    call.arguments_json = args->get<std::string>();
  } else {
    call.arguments_json = args->dump();
  }
  call.id = make_id("call_");
  return true;
}

// DeepSeek-V4's own encoding: tools as DeepSeek lists them (name, description, parameters),
// calls in DSML, thinking from the request's switch or its reasoning effort.
void encode_deepseek_v4_turn(const recipe::Tokenizer& tok, ChatTurn& turn, bool use_tools,
                             engine::GenerationRequest& request) {
  recipe::DeepseekV4ChatOptions o;
  o.thinking = turn.thinking;
  if (!turn.reasoning_effort.empty()) {
    auto choice = recipe::deepseek_v4_effort_from_api(turn.reasoning_effort);
    if (!choice)
      bad_request(turn.reasoning_effort_param, "'{}' must be none, minimal, low, medium, high, xhigh or max, got '{}'",
                  turn.reasoning_effort_param, turn.reasoning_effort);
    if (turn.thinking_param.empty() || turn.thinking_param == turn.reasoning_effort_param)
      o.thinking = choice->thinking;
    o.effort = choice->effort;
  }
  if (use_tools) {
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();
    for (const ToolSpec& t : turn.tools) {
      nlohmann::ordered_json f = {{"name", t.name}};
      if (!t.description.empty()) f["description"] = t.description;
      f["parameters"] = t.parameters;
      tools.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
    o.tools_json = tools.dump();
  }
  auto ids = recipe::encode_deepseek_v4_chat(tok, turn.messages, o);
  if (!ids.is_ok()) bad_request("messages", "the conversation cannot be encoded: {}", ids.status().message());
  request.prompt_ids = std::move(ids).value();
  turn.thinking = o.thinking;
  turn.parser = recipe::deepseek_v4_output_parser_options(use_tools, o.thinking);
  if (tool_call_forced(turn)) request.grammar = json_schema_grammar(forced_call_schema(turn), true);
}

}  // namespace

bool tool_call_forced(const ChatTurn& turn) {
  return !turn.tools.empty() &&
         (turn.tool_choice.mode == ToolChoice::kRequired || turn.tool_choice.mode == ToolChoice::kNamed);
}

std::string tool_calls_as_text(const std::vector<ToolCall>& calls) {
  std::string s;
  for (const ToolCall& c : calls) {
    json args = json::parse(c.arguments_json, nullptr, false);
    json call = {{"name", c.name}, {"arguments", args.is_discarded() ? json(c.arguments_json) : args}};
    s += std::string(kCallOpen) + call.dump() + std::string(kCallClose) + "\n";
  }
  return s;
}

std::string template_tool_calls_json(const std::vector<ToolCall>& calls) {
  // Ordered: the arguments keep the client's key order (DeepSeek-V4 replays one parameter per
  // key, in order; DeepSeek-V3 writes them back with json.dumps).
  using ojson = nlohmann::ordered_json;
  ojson arr = ojson::array();
  for (const ToolCall& c : calls) {
    ojson args = ojson::parse(c.arguments_json, nullptr, false);
    arr.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", args.is_discarded() ? ojson(c.arguments_json) : args}}}});
  }
  return arr.dump();
}

void encode_chat_turn(const recipe::Tokenizer& tok, const std::string& architecture, ChatTurn& turn,
                      engine::GenerationRequest& request) {
  std::vector<recipe::ChatMessage> messages = turn.messages;
  recipe::ChatOptions options;
  const bool use_tools = !turn.tools.empty() && turn.tool_choice.mode != ToolChoice::kNone;
  if (turn.tool_choice.mode == ToolChoice::kNamed) {
    bool found = false;
    for (const ToolSpec& t : turn.tools) found |= t.name == turn.tool_choice.name;
    if (!found) bad_request("tool_choice", "tool_choice names '{}', which is not among the tools", turn.tool_choice.name);
  }
  if (recipe::uses_deepseek_v4_chat(architecture)) return encode_deepseek_v4_turn(tok, turn, use_tools, request);
  if (auto style = recipe::deepseek_style_for(tok)) {
    // DeepSeek's own format: tools in its system-prompt layout, calls with its markers.
    recipe::DeepseekChatOptions ds;
    ds.style = *style;
    if (turn.thinking && ds.style == recipe::DeepseekChatStyle::kV3)
      bad_request(turn.thinking_param, "'{}': this model's chat format (DeepSeek-V3) has no thinking mode",
                  turn.thinking_param);
    ds.thinking = turn.thinking;
    if (use_tools) ds.tools_json = tools_as_openai_json(turn.tools).dump();
    auto ids = recipe::encode_deepseek_chat(tok, messages, ds);
    if (!ids.is_ok()) bad_request("messages", "the conversation cannot be encoded: {}", ids.status().message());
    request.prompt_ids = std::move(ids).value();
    turn.parser = recipe::output_parser_options_for("deepseek_v3", tok.chat_template(), use_tools, turn.thinking);
    if (tool_call_forced(turn)) request.grammar = json_schema_grammar(forced_call_schema(turn), true);
    return;
  }
  if (turn.thinking)
    bad_request(turn.thinking_param,
                "'{}': thinking mode is supported for DeepSeek V3.1 / R1 chat formats only",
                turn.thinking_param);
  // Reasoning markers the template knows (<think>...</think>) split reasoning_content off.
  turn.parser = recipe::output_parser_options_for(architecture, tok.chat_template(), false, false);
  if (use_tools && recipe::chat_template_renders_tools(tok)) {
    options.tools_json = tools_as_openai_json(turn.tools).dump();
    turn.parser = recipe::output_parser_options_for(architecture, tok.chat_template(), true, false);
  } else {
    if (use_tools) turn.parser.tools = recipe::ToolCallFormat::kHermes;  // the format we describe
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
            tc.arguments_json = args.is_string() ? args.get<std::string>() : args.dump();
            parsed.push_back(tc);
          }
        m.content += (m.content.empty() ? "" : "\n") + tool_calls_as_text(parsed);
        m.tool_calls_json.clear();
      }
      if (m.role == "tool") m.content = "<tool_response>" + m.content + "</tool_response>";
    }
    if (use_tools) {
      const std::string text = tool_instructions(turn.tools);
      if (!messages.empty() && messages[0].role == "system") {
        messages[0].content += "\n\n" + text;
        if (!messages[0].parts.empty()) messages[0].parts.push_back({false, "\n\n" + text});
      }
      else
        messages.insert(messages.begin(), recipe::ChatMessage{"system", text});
    }
  }
  auto ids = recipe::encode_chat(tok, messages, options);
  if (!ids.is_ok()) bad_request("messages", "the conversation cannot be encoded: {}", ids.status().message());
  request.prompt_ids = std::move(ids).value();
  if (tool_call_forced(turn)) request.grammar = json_schema_grammar(forced_call_schema(turn), true);
}

namespace {

bool plain_output(const ChatTurn& turn) {
  const bool tools = !turn.tools.empty() && turn.tool_choice.mode != ToolChoice::kNone;
  return !tools && !turn.parser.reasoning_tags;
}

}  // namespace

ChatOutputStream::ChatOutputStream(const ChatTurn& turn)
    : mode_(tool_call_forced(turn) ? Mode::kForcedCall : plain_output(turn) ? Mode::kPlain : Mode::kParsed),
      parser_(turn.parser) {}

void ChatOutputStream::push(std::string_view text) {
  switch (mode_) {
    case Mode::kPlain:
      content_ += text;
      return;
    case Mode::kForcedCall:
      text_ += text;
      return;
    case Mode::kParsed: {
      recipe::OutputDelta d = parser_.push(text);
      content_ += d.content;
      reasoning_ += d.reasoning_content;
      return;
    }
  }
}

ParsedOutput ChatOutputStream::finish() {
  ParsedOutput out;
  switch (mode_) {
    case Mode::kPlain:
      out.content = content_;
      break;
    case Mode::kForcedCall: {
      ToolCall call;
      if (parse_call_json(text_, call)) {
        out.tool_calls.push_back(call);
      } else {
        out.content = text_;  // cut by max_tokens: not a complete call
      }
      break;
    }
    case Mode::kParsed: {
      parser_.finish();
      out = parser_.result();
      break;
    }
  }
  content_ = out.content;
  reasoning_ = out.reasoning_content;
  return out;
}

ParsedOutput parse_chat_output(const ChatTurn& turn, const std::string& text) {
  ChatOutputStream s(turn);
  s.push(text);
  return s.finish();
}

}  // namespace deepinfer::serve
