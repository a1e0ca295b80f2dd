// The API-neutral chat turn: messages, tools and tool choice (already read from any of the
// three APIs) -> prompt token ids (+ a grammar when a tool call is forced); and the model's text
// -> content and tool calls.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/engine/request.h"
#include "deepinfer/recipe/chat.h"
#include "deepinfer/recipe/output_parser.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::serve {

struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::json parameters = nlohmann::json::object();  // JSON Schema of the arguments
};

struct ToolChoice {
  enum Mode { kAuto, kNone, kRequired, kNamed } mode = kAuto;
  std::string name;  // kNamed
};

using recipe::ToolCall;  // {id, name, arguments_json}

struct ChatTurn {
  std::vector<recipe::ChatMessage> messages;
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice;
  // Thinking mode: the prompt opens the model's reasoning block. DeepSeek V3.1 / R1 chat
  // formats only (others refuse it, naming `thinking_param`, the request field that asked).
  bool thinking = false;
  std::string thinking_param;
  // The request's reasoning effort (Chat Completions' reasoning_effort, Responses'
  // reasoning.effort) and its field name. DeepSeek-V4 reads it: none / minimal think not,
  // others think, xhigh / max at DeepSeek's maximum (unless `thinking_param` said otherwise).
  std::string reasoning_effort;
  std::string reasoning_effort_param;
  // Set by encode_chat_turn: how the model's reply marks tool calls (and reasoning).
  recipe::OutputParserOptions parser;
};

// Encodes the turn into request.prompt_ids. Tools: templates that render `tools` get them;
// otherwise a system message describes them and asks for <tool_call>{...}</tool_call>. A
// forced choice (required / named) constrains the output to the call's JSON with a grammar.
// Throws ApiError (400) when the chat cannot be encoded.
// DeepSeek vocabularies use DeepSeek's own chat encoding (recipe/deepseek_chat.h); DeepSeek-V4
// models (model_type deepseek_v4) the V4 one (recipe/deepseek_v4_chat.h).
void encode_chat_turn(const recipe::Tokenizer& tok, const std::string& architecture, ChatTurn& turn,
                      engine::GenerationRequest& request);

// Whether the turn forces a tool call (its output is then the call's JSON object).
bool tool_call_forced(const ChatTurn& turn);

using recipe::ParsedOutput;  // {content, reasoning_content (<think>...</think>), tool_calls}
// Splits generated text into content, reasoning and tool calls (forced: the whole text is one
// call; auto: the model's call markup). Unparseable calls stay in the content.
ParsedOutput parse_chat_output(const ChatTurn& turn, const std::string& text);

// The same split while streaming, one per choice: each push() extends content() and
// reasoning() by what can go out now (prefixes of the final ones: what may still be a tool
// call or a marker is held back); finish() gives the whole result. Linear in the reply length.
class ChatOutputStream {
 public:
  explicit ChatOutputStream(const ChatTurn& turn);
  void push(std::string_view text);
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  ParsedOutput finish();

 private:
  enum class Mode { kPlain, kForcedCall, kParsed } mode_;
  recipe::OutputParser parser_;
  std::string text_;  // kForcedCall: everything, parsed at the end
  std::string content_, reasoning_;
};

// How an assistant's earlier tool calls are written back into the prompt for templates that
// do not render tools themselves.
std::string tool_calls_as_text(const std::vector<ToolCall>& calls);
// The chat template's form of calls (ChatMessage::tool_calls_json): an OpenAI-style array
// whose arguments are parsed JSON objects, not the API's JSON strings.
std::string template_tool_calls_json(const std::vector<ToolCall>& calls);

}  // namespace deepinfer::serve
