// Chat encoding: messages -> token ids, through the model's own chat template (Jinja subset)
// or a built-in format (ChatML, Llama 3). Only template text may produce control tokens; what
// the request supplies (roles, contents) is always encoded as plain text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/recipe/jinja_value.h"

namespace deepinfer::recipe {

class Tokenizer;

// One part of a multimodal message's content, in order: text, or an image placeholder.
struct ChatPart {
  bool image = false;
  std::string text;  // a text part's text, or an image part's encoded bytes (JPEG / PNG / WebP)
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role_, std::string content_) : role(std::move(role_)), content(std::move(content_)) {}
  std::string role;
  std::string content;
  // Tool use, for templates that render it (all untrusted data): the assistant's calls as an
  // OpenAI-style JSON array [{"id","type":"function","function":{"name","arguments"}}], and for
  // role "tool" the id of the call answered and the tool's name.
  std::string tool_calls_json;
  std::string tool_call_id;
  std::string name;
  // An assistant turn's reasoning as the API returned it (reasoning_content / thinking block /
  // reasoning item); only formats that replay reasoning (DeepSeek-V4) read it.
  std::string reasoning_content;
  // Multimodal turns: the content as ordered parts, handed to templates as a list of
  // {"type": "text", "text": ...} / {"type": "image"} (what LLaVA-style templates iterate);
  // `content` still holds the text alone. Empty = a plain string content.
  std::vector<ChatPart> parts;
};

enum class ChatFormat {
  kAuto,      // the model's chat_template; a built-in format chosen by vocabulary if it has
              // none or uses constructs the interpreter does not support
  kTemplate,  // the model's chat_template, errors if it cannot be rendered
  kChatML,    // <|im_start|>role\ncontent<|im_end|>\n (SmolLM2, Qwen)
  kLlama3,    // <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
};

struct ChatOptions {
  bool add_generation_prompt = true;
  ChatFormat format = ChatFormat::kAuto;
  // Tool definitions handed to the template as `tools` (OpenAI-style JSON array); empty = none.
  std::string tools_json;
};

// Whether the model's chat template renders `tools` itself (else the caller describes them).
bool chat_template_renders_tools(const Tokenizer& tok);

// The rendered prompt: text plus the byte ranges that came from the template (trusted).
struct RenderedChat {
  jinja::TaggedString text;
  ChatFormat format_used = ChatFormat::kAuto;
  std::string fallback_reason;  // why kAuto did not use the model's template (empty if it did)
};

Result<RenderedChat> render_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                 const ChatOptions& options);

Result<std::vector<int32_t>> encode_chat(const Tokenizer& tok,
                                         const std::vector<ChatMessage>& messages,
                                         const ChatOptions& options);

// The chat encoding of a model as a whole: DeepSeek-V4's own (model_type deepseek_v4, which ships
// no template; chat mode, no tools) or else encode_chat with `options`. For callers without an
// API request, such as the CLI; the server picks per request (serve/chat_prompt.cc).
Result<std::vector<int32_t>> encode_chat_for_model(const Tokenizer& tok, std::string_view architecture,
                                                   const std::vector<ChatMessage>& messages,
                                                   const ChatOptions& options);

// Whether the model has a usable chat encoding: a template, or an architecture with its own
// whose markers the vocabulary holds.
bool has_chat_encoding(const Tokenizer& tok, std::string_view architecture);

// The built-in format that fits the vocabulary's control tokens, or kAuto when none does.
ChatFormat builtin_format_for(const Tokenizer& tok);

}  // namespace deepinfer::recipe
