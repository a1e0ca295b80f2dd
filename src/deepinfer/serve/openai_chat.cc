// POST /v1/chat/completions (OpenAI Chat Completions), streaming or not.
#include <httplib.h>

#include <set>

#include "deepinfer/serve/chat_prompt.h"
#include "deepinfer/serve/image_input.h"
#include "deepinfer/serve/openai_common.h"
#include "deepinfer/serve/request_fields.h"
#include "deepinfer/serve/routes.h"
#include "deepinfer/serve/stream_response.h"

namespace deepinfer::serve {
namespace {

using nlohmann::json;

// A content field into `msg`: a string, or a list of text and image_url parts.
void read_content(const json& content, const std::string& path, recipe::ChatMessage& msg) {
  if (content.is_null()) return;
  if (content.is_string()) {
    msg.content = content.get<std::string>();
    return;
  }
  if (!content.is_array()) bad_request(path, "'{}' must be a string or a list of content parts", path);
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string part_path = fmt::format("{}[{}]", path, j);
    const json& part = content[j];
    if (!part.is_object()) bad_request(part_path, "'{}' must be an object", part_path);
    const std::string type = req_string(part, "type", part_path);
    if (type == "text" || type == "input_text" || type == "output_text") {
      add_text_part(msg, req_string(part, "text", part_path));
    } else if (std::optional<std::string> img = read_image_part(part, type, part_path)) {
      add_image_part(msg, std::move(*img));
    } else {
      bad_request(part_path + ".type", "content part type '{}' at '{}' is not supported (text, image_url)", type,
                  part_path);
    }
  }
  drop_text_only_parts(msg);
}

std::vector<ToolSpec> read_chat_tools(const json& body) {
  std::vector<ToolSpec> tools;
  const json* f = field(body, "tools");
  if (!f) return tools;
  if (!f->is_array()) bad_request("tools", "'tools' must be a list");
  for (size_t i = 0; i < f->size(); ++i) {
    const std::string path = fmt::format("tools[{}]", i);
    const json& t = (*f)[i];
    if (!t.is_object()) bad_request(path, "'{}' must be an object", path);
    const std::string type = opt_string(t, "type", path).value_or("function");
    if (type != "function") bad_request(path + ".type", "'{}.type' must be 'function', got '{}'", path, type);
    const json* fn = field(t, "function");
    if (!fn || !fn->is_object()) bad_request(path + ".function", "'{}.function' (an object) is required", path);
    ToolSpec spec;
    spec.name = req_string(*fn, "name", path + ".function");
    if (spec.name.empty()) bad_request(path + ".function.name", "'{}.function.name' must not be empty", path);
    spec.description = opt_string(*fn, "description", path + ".function").value_or("");
    if (const json* p = field(*fn, "parameters")) {
      if (!p->is_object()) bad_request(path + ".function.parameters", "'{}.function.parameters' must be a JSON Schema object", path);
      spec.parameters = *p;
    }
    tools.push_back(std::move(spec));
  }
  return tools;
}

ToolChoice read_chat_tool_choice(const json& body, bool has_tools) {
  ToolChoice c;
  c.mode = has_tools ? ToolChoice::kAuto : ToolChoice::kNone;
  const json* f = field(body, "tool_choice");
  if (!f) return c;
  if (f->is_string()) {
    const std::string s = f->get<std::string>();
    if (s == "none") c.mode = ToolChoice::kNone;
    else if (s == "auto") c.mode = ToolChoice::kAuto;
    else if (s == "required") c.mode = ToolChoice::kRequired;
    else bad_request("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or a function, got '{}'", s);
  } else if (f->is_object()) {
    const json* fn = field(*f, "function");
    if (!fn || !fn->is_object()) bad_request("tool_choice.function", "'tool_choice.function' (an object) is required");
    c.mode = ToolChoice::kNamed;
    c.name = req_string(*fn, "name", "tool_choice.function");
  } else {
    bad_request("tool_choice", "'tool_choice' must be a string or an object");
  }
  if (c.mode != ToolChoice::kNone && !has_tools)
    bad_request("tool_choice", "'tool_choice' asks for a tool but 'tools' is empty");
  return c;
}

ChatTurn read_chat_turn(const json& body) {
  ChatTurn turn;
  const json* msgs = field(body, "messages");
  if (!msgs) bad_request("messages", "'messages' is required");
  if (!msgs->is_array() || msgs->empty()) bad_request("messages", "'messages' must be a non-empty list");
  std::set<std::string> issued_call_ids;  // by earlier assistant turns; tool messages answer them
  for (size_t i = 0; i < msgs->size(); ++i) {
    const std::string path = fmt::format("messages[{}]", i);
    const json& m = (*msgs)[i];
    if (!m.is_object()) bad_request(path, "'{}' must be an object", path);
    recipe::ChatMessage msg;
    msg.role = req_string(m, "role", path);
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      bad_request(path + ".role", "'{}.role' must be system, developer, user, assistant or tool, got '{}'", path, msg.role);
    const json* content = field(m, "content");
    if (!content && msg.role != "assistant") bad_request(path + ".content", "'{}.content' is required", path);
    if (content) read_content(*content, path + ".content", msg);
    if (const json* calls = field(m, "tool_calls")) {
      if (!calls->is_array()) bad_request(path + ".tool_calls", "'{}.tool_calls' must be a list", path);
      std::vector<ToolCall> parsed;
      for (size_t k = 0; k < calls->size(); ++k) {
        const std::string cpath = fmt::format("{}.tool_calls[{}]", path, k);
        const json& c = (*calls)[k];
        if (!c.is_object()) bad_request(cpath, "'{}' must be an object", cpath);
        const json* fn = field(c, "function");
        if (!fn || !fn->is_object()) bad_request(cpath + ".function", "'{}.function' is required", cpath);
        ToolCall call;
        call.id = req_string(c, "id", cpath);
        issued_call_ids.insert(call.id);
        call.name = req_string(*fn, "name", cpath + ".function");
        call.arguments_json = opt_string(*fn, "arguments", cpath + ".function").value_or("{}");
        parsed.push_back(std::move(call));
      }
      msg.tool_calls_json = template_tool_calls_json(parsed);
    }
    if (msg.role == "assistant")  // DeepSeek's field; models that replay reasoning read it
      msg.reasoning_content = opt_string(m, "reasoning_content", path).value_or("");
    if (msg.role == "tool") {
      msg.tool_call_id = req_string(m, "tool_call_id", path);
      if (!issued_call_ids.count(msg.tool_call_id))
        bad_request(path + ".tool_call_id",
                    "'{}.tool_call_id' is '{}', which no earlier assistant message's tool_calls issued; a "
                    "'tool' message must answer a preceding tool call", path, msg.tool_call_id);
    }
    msg.name = opt_string(m, "name", path).value_or("");
    turn.messages.push_back(std::move(msg));
  }
  turn.tools = read_chat_tools(body);
  turn.tool_choice = read_chat_tool_choice(body, !turn.tools.empty());
  if (auto effort = opt_string(body, "reasoning_effort", "")) {
    static const std::set<std::string> kEfforts = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    if (!kEfforts.contains(*effort))
      bad_request("reasoning_effort", "'reasoning_effort' must be none, minimal, low, medium, high, xhigh or max, got '{}'",
                  *effort);
    turn.reasoning_effort = *effort;
    turn.reasoning_effort_param = "reasoning_effort";
  }
  // vLLM/SGLang's way to switch a template's thinking mode (DeepSeek V3.1: "thinking", Qwen3
  // and others: "enable_thinking").
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) bad_request("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (auto it = kw->begin(); it != kw->end(); ++it) {
      const std::string path = "chat_template_kwargs." + it.key();
      if (it.key() != "thinking" && it.key() != "enable_thinking")
        bad_request(path, "'{}' is not supported (thinking, enable_thinking)", path);
      if (!it.value().is_boolean()) bad_request(path, "'{}' must be true or false", path);
      turn.thinking = it.value().get<bool>();
      turn.thinking_param = path;
    }
  }
  return turn;
}

// The API form of calls: arguments as a JSON string, "index" on streaming deltas.
json api_tool_calls(const std::vector<ToolCall>& calls, bool with_index) {
  json arr = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id}, {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments_json}}}};
    if (with_index) c["index"] = i;
    arr.push_back(std::move(c));
  }
  return arr;
}

}  // namespace

void handle_chat_completions(const ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const std::string model = check_model(ctx, body);
  const recipe::Tokenizer& tok = ctx.loop->tokenizer();

  auto turn = std::make_shared<ChatTurn>(read_chat_turn(body));
  engine::GenerationRequest base;
  read_sampling(body, base);
  read_traffic_class(body, req.get_header_value("X-Traffic-Class"), base);
  read_swa_restore(body, base);
  read_stop(body, "stop", base);
  read_logit_bias(body, tok.vocab_size(), base);
  base.max_tokens = read_max_tokens(body, {"max_completion_tokens", "max_tokens"}, 0);
  const int n = int(opt_int(body, "n", "", 1, 16).value_or(1));
  const bool want_logprobs = opt_bool(body, "logprobs", "").value_or(false);
  const int top_logprobs = int(opt_int(body, "top_logprobs", "", 0, 20).value_or(0));
  if (field(body, "top_logprobs") && !want_logprobs)
    bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (want_logprobs) base.sampling.logprobs = top_logprobs;
  if (const json* rf = field(body, "response_format")) read_response_format(*rf, "response_format", false, base);
  check_chat_images(ctx, *turn);
  encode_chat_turn(tok, ctx.loop->model_config().architecture, *turn, base);
  attach_chat_images(ctx, *turn, base);
  if (base.max_tokens == 0) base.max_tokens = engine::GenerationRequest::kUntilContextEnd;  // the engine clamps
  check_length(ctx, base, "messages");
  const bool stream = opt_bool(body, "stream", "").value_or(false);
  bool include_usage = false;
  if (const json* so = field(body, "stream_options")) include_usage = opt_bool(*so, "include_usage", "stream_options").value_or(false);

  const std::string id = make_id("chatcmpl-");
  const int64_t created = unix_now();
  const bool has_tools = !turn->tools.empty() && turn->tool_choice.mode != ToolChoice::kNone;

  if (!stream) {
    respond_when_done(ctx, fan_out(base, n), req, res, [=, &tok](const std::vector<Completion>& done) {
    json choices = json::array();
    int completion_tokens = 0;
    for (size_t i = 0; i < done.size(); ++i) {
      const Completion& c = done[i];
      completion_tokens += c.completion_tokens;
      ParsedOutput parsed = parse_chat_output(*turn, c.text);
      json message = {{"role", "assistant"}, {"content", parsed.content}};
      if (!parsed.reasoning_content.empty()) message["reasoning_content"] = parsed.reasoning_content;
      if (!parsed.tool_calls.empty()) {
        message["tool_calls"] = api_tool_calls(parsed.tool_calls, false);
        if (parsed.content.empty()) message["content"] = nullptr;
      }
      json choice = {{"index", i}, {"message", message}, {"logprobs", nullptr},
                     {"finish_reason", !parsed.tool_calls.empty() && c.finish_reason != engine::FinishReason::kLength
                                           ? "tool_calls" : openai_finish_reason(c.finish_reason)}};
      if (want_logprobs) choice["logprobs"] = {{"content", chat_logprobs(tok, c.logprobs)}};
      choices.push_back(std::move(choice));
    }
    json out = {{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", model},
                {"choices", choices}, {"system_fingerprint", nullptr},
                {"usage", openai_usage(done[0].prompt_tokens, completion_tokens, done[0].cached_tokens,
                                       done[0].replayed_tokens)}};
      return out;
    });
    return;
  }

  // Streaming: one chunk per engine output; content held back while it may be a tool call.
  struct State {
    std::vector<ChatOutputStream> output;
    std::vector<size_t> sent, reasoning_sent;
    int prompt_tokens = 0, cached_tokens = 0, replayed_tokens = 0, completion_tokens = 0;
  };
  auto state = std::make_shared<State>();
  state->output.assign(size_t(n), ChatOutputStream(*turn));
  state->sent.assign(size_t(n), 0);
  state->reasoning_sent.assign(size_t(n), 0);
  auto chunk = [=](json choice) {
    return json{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                {"system_fingerprint", nullptr}, {"choices", json::array({std::move(choice)})}};
  };
  StreamHandlers handlers;
  handlers.on_start = [=](SseWriter& sse) {
    for (int i = 0; i < n; ++i) {
      json c = chunk({{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                      {"finish_reason", nullptr}});
      if (include_usage) c["usage"] = nullptr;
      if (!sse.data(c)) return false;
    }
    return true;
  };
  handlers.on_output = [=, &tok](SseWriter& sse, int i, const engine::RequestOutput& out) {
    ChatOutputStream& output = state->output[size_t(i)];
    output.push(out.new_text);
    size_t& sent = state->sent[size_t(i)];
    size_t& reasoning_sent = state->reasoning_sent[size_t(i)];
    json delta = json::object();
    if (output.reasoning().size() > reasoning_sent) delta["reasoning_content"] = output.reasoning().substr(reasoning_sent);
    reasoning_sent = output.reasoning().size();
    if (output.content().size() > sent) delta["content"] = output.content().substr(sent);
    sent = output.content().size();
    json choice = {{"index", i}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (want_logprobs && !out.new_logprobs.empty()) choice["logprobs"] = {{"content", chat_logprobs(tok, out.new_logprobs)}};
    if (!delta.empty() || !choice["logprobs"].is_null()) {
      json c = chunk(choice);
      if (include_usage) c["usage"] = nullptr;
      if (!sse.data(c)) return false;
    }
    if (!out.finished) return true;
    state->prompt_tokens = out.prompt_tokens;
    state->cached_tokens = out.cached_tokens;
    state->replayed_tokens = out.replayed_tokens;
    state->completion_tokens += out.completion_tokens;
    std::string finish = openai_finish_reason(out.finish_reason);
    json final_delta = json::object();
    const ParsedOutput parsed = output.finish();  // text held back until now
    if (parsed.reasoning_content.size() > reasoning_sent)
      final_delta["reasoning_content"] = parsed.reasoning_content.substr(reasoning_sent);
    if (parsed.content.size() > sent) final_delta["content"] = parsed.content.substr(sent);
    if (has_tools && !parsed.tool_calls.empty()) {
      final_delta["tool_calls"] = api_tool_calls(parsed.tool_calls, true);
      if (out.finish_reason != engine::FinishReason::kLength) finish = "tool_calls";
    }
    json c = chunk({{"index", i}, {"delta", final_delta}, {"logprobs", nullptr}, {"finish_reason", finish}});
    if (include_usage) c["usage"] = nullptr;
    return sse.data(c);
  };
  handlers.on_end = [=](SseWriter& sse) {
    if (include_usage) {
      json c = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                {"system_fingerprint", nullptr}, {"choices", json::array()},
                {"usage", openai_usage(state->prompt_tokens, state->completion_tokens, state->cached_tokens,
                                       state->replayed_tokens)}};
      if (!sse.data(c)) return false;
    }
    return sse.raw("data: [DONE]\n\n");
  };
  start_stream(ctx, fan_out(base, n), std::move(handlers), req, res);
}

}  // namespace deepinfer::serve
