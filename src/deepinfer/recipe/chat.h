// Chat encoding: messages -> token ids, through the model's own chat template (Jinja subset)
// or a built-in format (ChatML, Llama 3). Only template text may produce control tokens; what
// the request supplies (roles, contents) is always encoded as plain text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/recipe/jinja_value.h"

namespace deepinfer::recipe {

class Tokenizer;

struct ChatMessage {
  std::string role;
  std::string content;
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
};

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

// The built-in format that fits the vocabulary's control tokens, or kAuto when none does.
ChatFormat builtin_format_for(const Tokenizer& tok);

}  // namespace deepinfer::recipe
