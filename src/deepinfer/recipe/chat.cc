// Chat encoding (see chat.h): template rendering with a cache of parsed templates, built-in
// formats, and tokenization that matches control tokens only inside template text.
#include "deepinfer/recipe/chat.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "deepinfer/base/log.h"
#include "deepinfer/recipe/deepseek_v4_chat.h"
#include "deepinfer/recipe/jinja.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::recipe {
namespace {

using jinja::TaggedString;

Result<std::shared_ptr<const jinja::Template>> parsed_template(const std::string& source) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const jinja::Template>, std::less<>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(source);
    if (it != cache.end()) return it->second;
  }
  DI_ASSIGN_OR_RETURN(auto t, jinja::Template::parse(source));
  auto shared = std::make_shared<const jinja::Template>(std::move(t));
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 64) cache.clear();
  cache.emplace(source, shared);
  return shared;
}

// JSON from a request -> template values; every string is untrusted data. Numbers that are
// not integers become their JSON text (the interpreter has no floats).
jinja::Value json_to_value(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return jinja::Value::none();
    case nlohmann::json::value_t::boolean: return jinja::Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return jinja::Value::integer(j.get<int64_t>());
    case nlohmann::json::value_t::string: return jinja::Value::data_str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      jinja::List l;
      for (const auto& x : j) l.push_back(json_to_value(x));
      return jinja::Value::list(std::move(l));
    }
    case nlohmann::json::value_t::object: {
      jinja::Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[it.key()] = json_to_value(it.value());
      return jinja::Value::dict(std::move(d));
    }
    default: return jinja::Value::data_str(j.dump());
  }
}

Result<jinja::Value> parse_json_value(const std::string& text, const char* what) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return invalid_argument("{} is not valid JSON", what);
  return json_to_value(j);
}

Result<TaggedString> render_template(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                     const ChatOptions& options) {
  DI_ASSIGN_OR_RETURN(auto tmpl, parsed_template(tok.chat_template()));
  jinja::List msgs;
  for (const auto& m : messages) {
    jinja::Dict d{{"role", jinja::Value::data_str(m.role)}, {"content", jinja::Value::data_str(m.content)}};
    if (!m.parts.empty()) {
      jinja::List parts;
      for (const ChatPart& p : m.parts) {
        jinja::Dict pd{{"type", jinja::Value::data_str(p.image ? "image" : "text")}};
        if (!p.image) pd["text"] = jinja::Value::data_str(p.text);
        parts.push_back(jinja::Value::dict(std::move(pd)));
      }
      d["content"] = jinja::Value::list(std::move(parts));
    }
    if (!m.tool_calls_json.empty()) {
      DI_ASSIGN_OR_RETURN(d["tool_calls"], parse_json_value(m.tool_calls_json, "tool_calls"));
    }
    if (!m.tool_call_id.empty()) d["tool_call_id"] = jinja::Value::data_str(m.tool_call_id);
    if (!m.name.empty()) d["name"] = jinja::Value::data_str(m.name);
    msgs.push_back(jinja::Value::dict(std::move(d)));
  }
  jinja::Dict globals;
  if (!options.tools_json.empty()) {
    DI_ASSIGN_OR_RETURN(globals["tools"], parse_json_value(options.tools_json, "tools"));
  }
  globals["messages"] = jinja::Value::list(std::move(msgs));
  globals["add_generation_prompt"] = jinja::Value::boolean(options.add_generation_prompt);
  // The model's own control-token texts are trusted, like template text.
  if (tok.bos_id() >= 0) globals["bos_token"] = jinja::Value::str(TaggedString::literal(tok.token_bytes(tok.bos_id())));
  if (tok.eos_id() >= 0) globals["eos_token"] = jinja::Value::str(TaggedString::literal(tok.token_bytes(tok.eos_id())));
  return tmpl->render(globals);
}

TaggedString render_chatml(const std::vector<ChatMessage>& messages, bool gen) {
  TaggedString t;
  for (const auto& m : messages) {
    t.append(TaggedString::literal("<|im_start|>"));
    t.append(TaggedString::data(m.role));
    t.append(TaggedString::literal("\n"));
    t.append(TaggedString::data(m.content));
    t.append(TaggedString::literal("<|im_end|>\n"));
  }
  if (gen) t.append(TaggedString::literal("<|im_start|>assistant\n"));
  return t;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n\r"), e = s.find_last_not_of(" \t\n\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Meta's reference format: contents are trimmed, every turn ends with <|eot_id|>.
TaggedString render_llama3(const std::vector<ChatMessage>& messages, bool gen) {
  TaggedString t = TaggedString::literal("<|begin_of_text|>");
  for (const auto& m : messages) {
    t.append(TaggedString::literal("<|start_header_id|>"));
    t.append(TaggedString::data(m.role));
    t.append(TaggedString::literal("<|end_header_id|>\n\n"));
    t.append(TaggedString::data(trim(m.content)));
    t.append(TaggedString::literal("<|eot_id|>"));
  }
  if (gen) t.append(TaggedString::literal("<|start_header_id|>assistant<|end_header_id|>\n\n"));
  return t;
}

}  // namespace

ChatFormat builtin_format_for(const Tokenizer& tok) {
  if (tok.special_token_id("<|start_header_id|>") && tok.special_token_id("<|eot_id|>"))
    return ChatFormat::kLlama3;
  if (tok.special_token_id("<|im_start|>") && tok.special_token_id("<|im_end|>"))
    return ChatFormat::kChatML;
  return ChatFormat::kAuto;
}

Result<RenderedChat> render_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                 const ChatOptions& options) {
  RenderedChat out;
  ChatFormat format = options.format;
  if (format == ChatFormat::kAuto || format == ChatFormat::kTemplate) {
    if (!tok.chat_template().empty()) {
      auto r = render_template(tok, messages, options);
      if (r.is_ok()) {
        out.text = std::move(r).value();
        out.format_used = ChatFormat::kTemplate;
        return out;
      }
      // raise_exception() and other input errors go back to the caller; only constructs we
      // cannot interpret (or fail to parse) fall back to a built-in format.
      bool interpreter_gap = r.status().code() == StatusCode::kUnsupported ||
                             r.status().message().find("raised an error") == std::string::npos;
      if (format == ChatFormat::kTemplate || !interpreter_gap) return r.status();
      out.fallback_reason = r.status().message();
    } else if (format == ChatFormat::kTemplate) {
      return not_found("the model declares no chat_template");
    } else {
      out.fallback_reason = "the model declares no chat_template";
    }
    format = builtin_format_for(tok);
    if (format == ChatFormat::kAuto)
      return unsupported("no usable chat template ({}) and no built-in format fits the vocabulary",
                         out.fallback_reason);
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log::warn("chat template not used ({}); falling back to {}", out.fallback_reason,
                format == ChatFormat::kLlama3 ? "Llama 3" : "ChatML");
  }
  out.format_used = format;
  out.text = format == ChatFormat::kLlama3 ? render_llama3(messages, options.add_generation_prompt)
                                           : render_chatml(messages, options.add_generation_prompt);
  return out;
}

bool chat_template_renders_tools(const Tokenizer& tok) {
  return tok.chat_template().find("tools") != std::string::npos;
}

Result<std::vector<int32_t>> encode_chat(const Tokenizer& tok,
                                         const std::vector<ChatMessage>& messages,
                                         const ChatOptions& options) {
  DI_ASSIGN_OR_RETURN(RenderedChat r, render_chat(tok, messages, options));
  return tok.encode_trusted(r.text.text, r.text.trusted);
}

Result<std::vector<int32_t>> encode_chat_for_model(const Tokenizer& tok, std::string_view architecture,
                                                   const std::vector<ChatMessage>& messages,
                                                   const ChatOptions& options) {
  if (uses_deepseek_v4_chat(architecture)) return encode_deepseek_v4_chat(tok, messages, DeepseekV4ChatOptions{});
  return encode_chat(tok, messages, options);
}

bool has_chat_encoding(const Tokenizer& tok, std::string_view architecture) {
  // DeepSeek-V4's encoding needs its turn markers in the vocabulary (a test checkpoint with a toy
  // tokenizer has none: it runs on raw prompts, and --chat then says which marker is missing).
  if (uses_deepseek_v4_chat(architecture)) return tok.special_token_id("<｜User｜>").has_value();
  return !tok.chat_template().empty();
}

}  // namespace deepinfer::recipe
