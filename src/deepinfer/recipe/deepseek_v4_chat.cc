// DeepSeek-V4 chat encoding (see deepseek_v4_chat.h). The steps follow encoding_dsv4.py's
// encode_messages: tool messages merge into user turns, tool results are sorted into the order
// of the calls, earlier reasoning (and earlier developer turns) is dropped in thinking mode
// unless tools are offered, then each message is rendered with the marker that follows it.
#include "deepinfer/recipe/deepseek_v4_chat.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::recipe {
namespace {

using jinja::TaggedString;
using ojson = nlohmann::ordered_json;

constexpr const char* kBos = "<｜begin▁of▁sentence｜>";
constexpr const char* kEos = "<｜end▁of▁sentence｜>";
constexpr const char* kUser = "<｜User｜>";
constexpr const char* kAssistant = "<｜Assistant｜>";
constexpr const char* kThinkOpen = "<think>";
constexpr const char* kThinkClose = "</think>";
constexpr const char* kDsml = "｜DSML｜";

constexpr const char* kEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate "
    "step, considered alternative, and rejected hypothesis to ensure absolutely no assumption "
    "is left unchecked.\n\n";

struct Out {
  TaggedString t;
  void lit(const std::string& s) { t.append(TaggedString::literal(s)); }
  void data(const std::string& s) { t.append(TaggedString::data(s)); }
};

// One part of a user turn: its text, or a tool's result (answering call `call_id`).
struct Block {
  bool tool_result = false;
  std::string text;
  std::string call_id;
};

struct Call {
  std::string id, name;
  ojson arguments;  // an object
};

// A message after DeepSeek's preprocessing.
struct Turn {
  std::string role;  // system | developer | user | assistant
  std::string content, reasoning;
  std::vector<Block> blocks;  // user turns
  std::vector<Call> calls;    // assistant turns
  bool tools = false;         // system turn that carries the tool descriptions
};

// Arguments as DeepSeek reads them: a JSON object given as text (OpenAI's form) or as an object;
// text that is not JSON becomes {"arguments": text}.
Result<ojson> call_arguments(const ojson& args, size_t index, size_t k) {
  ojson parsed = args;
  if (args.is_string()) {
    const std::string& text = args.get_ref<const std::string&>();
    if (json_nesting_depth(text) > kMaxJsonDepth)
      return invalid_argument("messages[{}].tool_calls[{}] arguments are nested deeper than {}", index, k,
                              kMaxJsonDepth);
    parsed = ojson::parse(text, nullptr, false);
    if (parsed.is_discarded()) return ojson{{"arguments", text}};
  } else if (args.is_null()) {
    parsed = ojson::object();
  }
  if (!parsed.is_object())
    return invalid_argument("messages[{}].tool_calls[{}] arguments are not a JSON object", index, k);
  return parsed;
}

Result<std::vector<Call>> parse_calls(const std::string& calls_json, size_t index) {
  std::vector<Call> calls;
  if (calls_json.empty()) return calls;
  if (json_nesting_depth(calls_json) > kMaxJsonDepth)
    return invalid_argument("messages[{}].tool_calls is nested deeper than {}", index, kMaxJsonDepth);
  const ojson j = ojson::parse(calls_json, nullptr, false);
  if (j.is_discarded() || !j.is_array())
    return invalid_argument("messages[{}].tool_calls is not a JSON array", index);
  for (size_t k = 0; k < j.size(); ++k) {
    const ojson& c = j[k];
    const ojson& f = c.is_object() && c.contains("function") ? c["function"] : c;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
      return invalid_argument("messages[{}].tool_calls[{}] has no function name", index, k);
    Call call;
    call.name = f["name"].get<std::string>();
    if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
    DI_ASSIGN_OR_RETURN(call.arguments,
                        call_arguments(f.contains("arguments") ? f["arguments"] : ojson(), index, k));
    calls.push_back(std::move(call));
  }
  return calls;
}

// User and tool messages in a row become one user turn of blocks.
Result<std::vector<Turn>> merge_turns(const std::vector<ChatMessage>& messages) {
  std::vector<Turn> turns;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || m.role == "tool") {
      Block b{m.role == "tool", m.content, m.tool_call_id};
      if (turns.empty() || turns.back().role != "user") turns.push_back(Turn{"user", "", "", {}, {}, false});
      turns.back().blocks.push_back(std::move(b));
    } else if (m.role == "assistant") {
      Turn t{"assistant", m.content, m.reasoning_content, {}, {}, false};
      DI_ASSIGN_OR_RETURN(t.calls, parse_calls(m.tool_calls_json, i));
      turns.push_back(std::move(t));
    } else if (m.role == "system" || m.role == "developer") {
      if (m.role == "developer" && m.content.empty())
        return invalid_argument("messages[{}]: a developer message needs content", i);
      turns.push_back(Turn{m.role, m.content, "", {}, {}, false});
    } else {
      return invalid_argument("messages[{}].role '{}' is not system, developer, user, assistant or tool", i,
                              m.role);
    }
  }
  return turns;
}

// Several results in one user turn follow the order of the last assistant turn with calls
// (results for unknown ids rank as the first call; ties keep their order).
void sort_tool_results(std::vector<Turn>& turns) {
  std::vector<std::pair<std::string, size_t>> order;  // call id -> position
  for (Turn& t : turns) {
    if (t.role == "assistant" && !t.calls.empty()) {
      order.clear();
      for (size_t k = 0; k < t.calls.size(); ++k)
        if (!t.calls[k].id.empty()) order.emplace_back(t.calls[k].id, k);
      continue;
    }
    if (t.role != "user" || order.empty()) continue;
    std::vector<Block> results;
    for (const Block& b : t.blocks)
      if (b.tool_result) results.push_back(b);
    if (results.size() < 2) continue;
    auto rank = [&](const Block& b) {
      size_t r = 0;  // a repeated id ranks at its last call, as a dict's last write wins
      for (const auto& [id, k] : order)
        if (id == b.call_id) r = k;
      return r;
    };
    std::stable_sort(results.begin(), results.end(),
                     [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
    size_t next = 0;
    for (Block& b : t.blocks)
      if (b.tool_result) b = results[next++];
  }
}

int last_user_index(const std::vector<Turn>& turns) {
  for (size_t i = turns.size(); i-- > 0;)
    if (turns[i].role == "user" || turns[i].role == "developer") return int(i);
  return -1;
}

// Thinking mode without tools: developer turns before the last user turn are dropped (the
// reasoning of earlier assistant turns is dropped when they are rendered).
std::vector<Turn> drop_early_developer_turns(std::vector<Turn> turns) {
  const int last = last_user_index(turns);
  std::vector<Turn> kept;
  for (size_t i = 0; i < turns.size(); ++i)
    if (turns[i].role != "developer" || int(i) >= last) kept.push_back(std::move(turns[i]));
  return kept;
}

void append_call(Out& o, const Call& c) {
  o.lit(std::string("<") + kDsml + "invoke name=\"");
  o.data(c.name);
  o.lit("\">\n");
  bool first = true;
  for (const auto& [key, value] : c.arguments.items()) {
    if (!first) o.lit("\n");
    first = false;
    o.lit(std::string("<") + kDsml + "parameter name=\"");
    o.data(key);
    o.lit(value.is_string() ? "\" string=\"true\">" : "\" string=\"false\">");
    o.data(value.is_string() ? value.get<std::string>() : python_json_dumps(value, false));
    o.lit(std::string("</") + kDsml + "parameter>");
  }
  o.lit(std::string("\n</") + kDsml + "invoke>");
}

struct RenderState {
  const DeepseekV4ChatOptions& options;
  bool drop = true;  // drop reasoning before the last user turn
  int last_user = -1;
  const TaggedString& tools;
};

void render_user(Out& o, const Turn& t) {
  o.lit(kUser);
  for (size_t k = 0; k < t.blocks.size(); ++k) {
    if (k) o.lit("\n\n");
    const Block& b = t.blocks[k];
    if (b.tool_result) o.lit("<tool_result>");
    o.data(b.text);
    if (b.tool_result) o.lit("</tool_result>");
  }
}

void render_assistant(Out& o, const Turn& t, size_t index, const RenderState& s) {
  if (s.options.thinking && (!s.drop || int(index) > s.last_user)) {
    o.data(t.reasoning);
    o.lit(kThinkClose);
  }
  o.data(t.content);
  if (!t.calls.empty()) {
    o.lit(std::string("\n\n<") + kDsml + "tool_calls>\n");
    for (size_t k = 0; k < t.calls.size(); ++k) {
      if (k) o.lit("\n");
      append_call(o, t.calls[k]);
    }
    o.lit(std::string("\n</") + kDsml + "tool_calls>");
  }
  o.lit(kEos);
}

void render_turn(Out& o, const std::vector<Turn>& turns, size_t index, const RenderState& s) {
  const Turn& t = turns[index];
  if (index == 0 && s.options.thinking && s.options.effort == DeepseekV4Effort::kMax) o.lit(kEffortMax);
  if (t.role == "system") {
    o.data(t.content);
    if (t.tools) {
      o.lit("\n\n");
      o.t.append(s.tools);
    }
  } else if (t.role == "developer") {
    o.lit(kUser);
    o.data(t.content);
  } else if (t.role == "user") {
    render_user(o, t);
  } else {
    render_assistant(o, t, index, s);
  }
  // A user turn hands over to the assistant unless another non-assistant message follows.
  if (index + 1 < turns.size() && turns[index + 1].role != "assistant") return;
  if (t.role != "user" && t.role != "developer") return;
  o.lit(kAssistant);
  const bool think = s.options.thinking && (!s.drop || int(index) >= s.last_user);
  o.lit(think ? kThinkOpen : kThinkClose);
}

}  // namespace

Result<TaggedString> deepseek_v4_tools_prompt(const std::string& tools_json) {
  Out o;
  if (tools_json.empty()) return o.t;
  if (json_nesting_depth(tools_json) > kMaxJsonDepth)
    return invalid_argument("tools is nested deeper than {}", kMaxJsonDepth);
  const ojson tools = ojson::parse(tools_json, nullptr, false);
  if (tools.is_discarded() || !tools.is_array()) return invalid_argument("tools is not a JSON array");
  if (tools.empty()) return o.t;
  const std::string d = kDsml;
  o.lit("## Tools\n\nYou have access to a set of tools to help answer the user's question. You can "
        "invoke tools by writing a \"<" + d + "tool_calls>\" block like the following:\n\n<" + d +
        "tool_calls>\n<" + d + "invoke name=\"$TOOL_NAME\">\n<" + d +
        "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + d +
        "parameter>\n...\n</" + d + "invoke>\n<" + d + "invoke name=\"$TOOL_NAME2\">\n...\n</" + d +
        "invoke>\n</" + d + "tool_calls>\n\n"
        "String parameters should be specified as is and set `string=\"true\"`. For all other "
        "types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
        "`string=\"false\"`.\n\n"
        "If thinking_mode is enabled (triggered by <think>), you MUST output your complete "
        "reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\n"
        "Otherwise, output directly after </think> with tool calls or final response.\n\n"
        "### Available Tool Schemas\n\n");
  for (size_t k = 0; k < tools.size(); ++k) {
    const ojson& t = tools[k];
    const ojson& f = t.is_object() && t.contains("function") ? t["function"] : t;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
      return invalid_argument("tools[{}] has no function name", k);
    if (k) o.lit("\n");
    o.data(python_json_dumps(f, false));
  }
  o.lit("\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
        "tool calls.\n");
  return o.t;
}

Result<TaggedString> render_deepseek_v4_chat(const std::vector<ChatMessage>& messages,
                                             const DeepseekV4ChatOptions& options) {
  DI_ASSIGN_OR_RETURN(std::vector<Turn> turns, merge_turns(messages));
  DI_ASSIGN_OR_RETURN(TaggedString tools, deepseek_v4_tools_prompt(options.tools_json));
  const bool have_tools = !tools.text.empty();
  if (have_tools) {
    if (turns.empty() || turns[0].role != "system") turns.insert(turns.begin(), Turn{"system", "", "", {}, {}, false});
    turns[0].tools = true;
  }
  sort_tool_results(turns);
  const bool drop = options.drop_thinking && !have_tools;
  if (options.thinking && drop) turns = drop_early_developer_turns(std::move(turns));
  RenderState s{options, drop, last_user_index(turns), tools};
  Out o;
  o.lit(kBos);
  for (size_t i = 0; i < turns.size(); ++i) render_turn(o, turns, i, s);
  return o.t;
}

Result<std::vector<int32_t>> encode_deepseek_v4_chat(const Tokenizer& tok,
                                                     const std::vector<ChatMessage>& messages,
                                                     const DeepseekV4ChatOptions& options) {
  for (const char* marker : {kBos, kEos, kUser, kAssistant, kThinkOpen, kThinkClose, kDsml})
    if (!tok.special_token_id(marker))
      return invalid_argument("DeepSeek-V4 chat format: the vocabulary has no control token {}", marker);
  DI_ASSIGN_OR_RETURN(TaggedString text, render_deepseek_v4_chat(messages, options));
  return tok.encode_trusted(text.text, text.trusted);
}

// DeepSeek-V4.1 keeps V4's tokenizer and encoding (shared/design/DEEPSEEK_V4.md, "Tokenizer and
// chat encoding": encoding_dsv4.py; its image token 129279 is V4.1's vision input).
bool uses_deepseek_v4_chat(std::string_view architecture) {
  return architecture == "deepseek_v4" || architecture == "deepseek_v41";
}

std::optional<DeepseekV4EffortChoice> deepseek_v4_effort_from_api(std::string_view effort) {
  if (effort == "none" || effort == "minimal") return DeepseekV4EffortChoice{false, DeepseekV4Effort::kDefault};
  if (effort == "low" || effort == "medium" || effort == "high")
    return DeepseekV4EffortChoice{true, DeepseekV4Effort::kHigh};
  if (effort == "xhigh" || effort == "max") return DeepseekV4EffortChoice{true, DeepseekV4Effort::kMax};
  return std::nullopt;
}

OutputParserOptions deepseek_v4_output_parser_options(bool tools, bool thinking) {
  OutputParserOptions o;
  o.tools = tools ? ToolCallFormat::kDeepseekDsml : ToolCallFormat::kNone;
  o.reasoning_tags = true;
  o.starts_in_reasoning = thinking;
  return o;
}

}  // namespace deepinfer::recipe
