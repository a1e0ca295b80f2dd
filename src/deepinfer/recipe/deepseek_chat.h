// DeepSeek's chat format written natively (no Jinja): V3 (0324), R1 and V3.1 conventions for
// system, user, assistant, thinking, tool definitions, tool calls and tool results. Only the
// format's own markers become control tokens; every message text is encoded as plain text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/recipe/chat.h"
#include "deepinfer/recipe/jinja_value.h"

namespace deepinfer::recipe {

class Tokenizer;

enum class DeepseekChatStyle {
  // DeepSeek-V3 / V3-0324: "<｜User｜>text<｜Assistant｜>", calls as
  // "function<｜tool▁sep｜>name\n```json\nargs\n```", results inside
  // <｜tool▁outputs▁begin｜>...<｜tool▁outputs▁end｜>.
  kV3,
  // DeepSeek-R1: like V3's tool encoding, but "<｜Assistant｜>" opens each assistant turn,
  // earlier turns lose their reasoning (text up to the last </think>), and the generation
  // prompt opens "<think>\n" in thinking mode.
  kR1,
  // DeepSeek-V3.1: "<｜Assistant｜></think>" (non-thinking) or "<｜Assistant｜><think>"
  // (thinking), calls as "name<｜tool▁sep｜>args", one <｜tool▁output▁begin｜> per result.
  kV31,
};

struct DeepseekChatOptions {
  DeepseekChatStyle style = DeepseekChatStyle::kV31;
  bool add_generation_prompt = true;
  // Thinking mode: V3.1 opens <think> instead of closing it; R1 opens "<think>\n". V3 has none.
  bool thinking = false;
  // OpenAI-style tools array ([{"type":"function","function":{name, description,
  // parameters}}], or the inner objects alone); described in the system prompt. Empty = none.
  std::string tools_json;
};

// The chat as text with the byte ranges that are format markers (trusted). Messages use
// ChatMessage: role system|user|assistant|tool, assistant calls in tool_calls_json (OpenAI
// array; "arguments" a JSON string or object). Bad roles or JSON are invalid_argument.
Result<jinja::TaggedString> render_deepseek_chat(const std::vector<ChatMessage>& messages,
                                                 const DeepseekChatOptions& options);

// render_deepseek_chat, tokenized: markers (incl. BOS) as control ids, message text as plain
// text even where it spells a marker.
Result<std::vector<int32_t>> encode_deepseek_chat(const Tokenizer& tok,
                                                  const std::vector<ChatMessage>& messages,
                                                  const DeepseekChatOptions& options);

// Which DeepSeek style a model's chat_template follows; nullopt when it is not DeepSeek's.
std::optional<DeepseekChatStyle> deepseek_style_from_template(const std::string& chat_template);
// For a loaded tokenizer: its template's style; with no template, kV31 when the vocabulary has
// DeepSeek's <｜User｜>/<｜Assistant｜> markers (the V3 tokenizer package ships none); else
// nullopt. The server uses this to route DeepSeek chats to encode_deepseek_chat.
std::optional<DeepseekChatStyle> deepseek_style_for(const Tokenizer& tok);

// The system-prompt text that describes `tools_json` in the style's call format (empty when
// there are no tools). Exposed for tests and docs.
Result<jinja::TaggedString> deepseek_tools_prompt(const std::string& tools_json,
                                                  DeepseekChatStyle style);

}  // namespace deepinfer::recipe
