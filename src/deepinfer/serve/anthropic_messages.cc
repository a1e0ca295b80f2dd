// POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages), streaming with
// Anthropic's named SSE events or not.
#include <set>

#include <httplib.h>

#include "deepinfer/serve/image_input.h"
#include "deepinfer/serve/chat_prompt.h"
#include "deepinfer/serve/request_fields.h"
#include "deepinfer/serve/routes.h"
#include "deepinfer/serve/stream_response.h"

namespace deepinfer::serve {
namespace {

using nlohmann::json;

// A system prompt or a tool_result content: a string or a list of text blocks.
std::string read_text_blocks(const json& v, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad_request(path, "'{}' must be a string or a list of content blocks", path);
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", path, i);
    if (!v[i].is_object()) bad_request(p, "'{}' must be an object", p);
    const std::string type = req_string(v[i], "type", p);
    if (type != "text") bad_request(p + ".type", "content block type '{}' at '{}' is not supported here (text only)", type, p);
    text += req_string(v[i], "text", p);
  }
  return text;
}

ChatTurn read_messages_turn(const json& body) {
  ChatTurn turn;
  if (const json* sys = field(body, "system")) {
    std::string text = read_text_blocks(*sys, "system");
    if (!text.empty()) turn.messages.push_back({"system", text});
  }
  const json* msgs = field(body, "messages");
  if (!msgs) bad_request("messages", "messages: field required");
  if (!msgs->is_array() || msgs->empty()) bad_request("messages", "messages: must be a non-empty list");
  std::set<std::string> issued_ids;  // tool_use ids of earlier assistant turns
  for (size_t i = 0; i < msgs->size(); ++i) {
    const std::string path = fmt::format("messages.{}", i);
    const json& m = (*msgs)[i];
    if (!m.is_object()) bad_request(path, "{}: must be an object", path);
    const std::string role = req_string(m, "role", path);
    if (role != "user" && role != "assistant")
      bad_request(path + ".role", "{}.role: must be 'user' or 'assistant', got '{}'", path, role);
    const json* content = field(m, "content");
    if (!content) bad_request(path + ".content", "{}.content: field required", path);
    if (content->is_string()) {
      turn.messages.push_back({role, content->get<std::string>()});
      continue;
    }
    if (!content->is_array()) bad_request(path + ".content", "{}.content: must be a string or a list of blocks", path);
    recipe::ChatMessage msg{role, ""};
    std::vector<ToolCall> calls;
    for (size_t j = 0; j < content->size(); ++j) {
      const std::string bp = fmt::format("{}.content.{}", path, j);
      const json& b = (*content)[j];
      if (!b.is_object()) bad_request(bp, "{}: must be an object", bp);
      const std::string type = req_string(b, "type", bp);
      if (type == "text") {
        add_text_part(msg, req_string(b, "text", bp));
      } else if (type == "image") {
        add_image_part(msg, *read_image_part(b, type, bp));
      } else if (type == "tool_use") {
        if (role != "assistant") bad_request(bp, "{}: tool_use blocks belong to assistant messages", bp);
        ToolCall c;
        c.id = req_string(b, "id", bp);
        issued_ids.insert(c.id);
        c.name = req_string(b, "name", bp);
        const json* input = field(b, "input");
        c.arguments_json = input ? input->dump() : "{}";
        calls.push_back(std::move(c));
      } else if (type == "tool_result") {
        if (role != "user") bad_request(bp, "{}: tool_result blocks belong to user messages", bp);
        // Results become tool messages, in order, before the rest of the user's text.
        if (!msg.content.empty() || !msg.parts.empty()) {
          drop_text_only_parts(msg);
          turn.messages.push_back(msg);
          msg.content.clear();
          msg.parts.clear();
        }
        recipe::ChatMessage result{"tool", ""};
        result.tool_call_id = req_string(b, "tool_use_id", bp);
        if (!issued_ids.count(result.tool_call_id))
          bad_request(bp + ".tool_use_id",
                      "{}.tool_use_id: '{}' does not match any tool_use block of an earlier assistant message",
                      bp, result.tool_call_id);
        if (const json* rc = field(b, "content")) result.content = read_text_blocks(*rc, bp + ".content");
        if (opt_bool(b, "is_error", bp).value_or(false)) result.content = "Error: " + result.content;
        turn.messages.push_back(std::move(result));
      } else if (type == "thinking") {
        // Kept for models that replay reasoning (DeepSeek-V4); others ignore it.
        if (role == "assistant") msg.reasoning_content += opt_string(b, "thinking", bp).value_or("");
      } else if (type == "redacted_thinking") {
        continue;
      } else {
        bad_request(bp + ".type", "{}.type: content block type '{}' is not supported by this model", bp, type);
      }
    }
    if (!calls.empty()) msg.tool_calls_json = template_tool_calls_json(calls);
    drop_text_only_parts(msg);
    if (!msg.content.empty() || !msg.parts.empty() || !msg.tool_calls_json.empty() || !msg.reasoning_content.empty())
      turn.messages.push_back(std::move(msg));
  }
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) bad_request("tools", "tools: must be a list");
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string tp = fmt::format("tools.{}", i);
      const json& t = (*tools)[i];
      if (!t.is_object()) bad_request(tp, "{}: must be an object", tp);
      if (auto type = opt_string(t, "type", tp); type && *type != "custom")
        bad_request(tp + ".type", "{}.type: server tool '{}' is not supported", tp, *type);
      ToolSpec spec;
      spec.name = req_string(t, "name", tp);
      spec.description = opt_string(t, "description", tp).value_or("");
      const json* schema = field(t, "input_schema");
      if (!schema || !schema->is_object()) bad_request(tp + ".input_schema", "{}.input_schema: field required (an object)", tp);
      spec.parameters = *schema;
      turn.tools.push_back(std::move(spec));
    }
  }
  // Extended thinking: {"type": "enabled", "budget_tokens": N} | {"type": "adaptive"} |
  // {"type": "disabled"}. budget_tokens is validated but not enforced (max_tokens bounds the
  // whole reply).
  if (const json* th = field(body, "thinking")) {
    if (!th->is_object()) bad_request("thinking", "thinking: must be an object");
    const std::string type = req_string(*th, "type", "thinking");
    if (type != "enabled" && type != "adaptive" && type != "disabled")
      bad_request("thinking.type", "thinking.type: must be enabled, adaptive or disabled, got '{}'", type);
    if (type == "enabled" && !opt_int(*th, "budget_tokens", "thinking", 1, 1 << 24))
      bad_request("thinking.budget_tokens", "thinking.budget_tokens: field required (an integer >= 1)");
    turn.thinking = type != "disabled";
    turn.thinking_param = "thinking.type";
  }
  turn.tool_choice.mode = turn.tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (const json* tc = field(body, "tool_choice")) {
    if (!tc->is_object()) bad_request("tool_choice", "tool_choice: must be an object");
    const std::string type = req_string(*tc, "type", "tool_choice");
    if (type == "auto") turn.tool_choice.mode = ToolChoice::kAuto;
    else if (type == "any") turn.tool_choice.mode = ToolChoice::kRequired;
    else if (type == "none") turn.tool_choice.mode = ToolChoice::kNone;
    else if (type == "tool") {
      turn.tool_choice.mode = ToolChoice::kNamed;
      turn.tool_choice.name = req_string(*tc, "name", "tool_choice");
    } else {
      bad_request("tool_choice.type", "tool_choice.type: must be auto, any, tool or none, got '{}'", type);
    }
    if (turn.tools.empty() && turn.tool_choice.mode != ToolChoice::kNone)
      bad_request("tool_choice", "tool_choice: asks for a tool but 'tools' is empty");
  }
  return turn;
}

const char* stop_reason(const Completion& c, bool tool_use) {
  if (c.finish_reason == engine::FinishReason::kLength) return "max_tokens";
  if (c.finish_reason == engine::FinishReason::kGrammarDeadEnd) return "grammar_dead_end";
  if (c.finish_reason == engine::FinishReason::kAbort) return "abort";  // cut by the server's stop
  if (tool_use) return "tool_use";
  if (!c.matched_stop.empty()) return "stop_sequence";
  return "end_turn";
}

json usage_json(int input, int output, int cached) {
  return {{"input_tokens", input - cached}, {"output_tokens", output},
          {"cache_read_input_tokens", cached}, {"cache_creation_input_tokens", 0}};
}

json content_blocks(const ParsedOutput& parsed) {
  json blocks = json::array();
  // No signature: the reasoning is ours to read back, not a provider-signed artifact.
  if (!parsed.reasoning_content.empty())
    blocks.push_back({{"type", "thinking"}, {"thinking", parsed.reasoning_content}, {"signature", ""}});
  if (!parsed.content.empty() || parsed.tool_calls.empty()) blocks.push_back({{"type", "text"}, {"text", parsed.content}});
  for (const ToolCall& c : parsed.tool_calls) {
    json input = json::parse(c.arguments_json, nullptr, false);
    blocks.push_back({{"type", "tool_use"}, {"id", "toolu_" + c.id.substr(c.id.find('_') + 1)}, {"name", c.name},
                      {"input", input.is_object() ? input : json::object()}});
  }
  return blocks;
}

engine::GenerationRequest read_request(const ServerContext& ctx, const json& body, ChatTurn& turn) {
  engine::GenerationRequest r;
  read_sampling(body, r);
  // Anthropic's ranges: temperature 0-1 (OpenAI's goes to 2).
  opt_number(body, "temperature", "", 0, 1);
  read_stop(body, "stop_sequences", r);
  const auto max_tokens = opt_int(body, "max_tokens", "", 1, 1 << 24);
  if (!max_tokens) bad_request("max_tokens", "max_tokens: field required (an integer >= 1)");
  r.max_tokens = int(*max_tokens);
  if (const json* oc = field(body, "output_config")) {
    if (const json* f = field(*oc, "format")) {
      const std::string type = req_string(*f, "type", "output_config.format");
      if (type != "json_schema") bad_request("output_config.format.type", "output_config.format.type: must be 'json_schema'");
      const json* schema = field(*f, "schema");
      if (!schema || !schema->is_object()) bad_request("output_config.format.schema", "output_config.format.schema: field required");
      r.grammar = json_schema_grammar(*schema, true);
    }
  }
  check_chat_images(ctx, turn);
  encode_chat_turn(ctx.loop->tokenizer(), ctx.loop->model_config().architecture, turn, r);
  attach_chat_images(ctx, turn, r);
  check_length(ctx, r, "messages");
  return r;
}

}  // namespace

void handle_count_tokens(const ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_model(ctx, body);
  ChatTurn turn = read_messages_turn(body);
  engine::GenerationRequest r;
  check_chat_images(ctx, turn);
  encode_chat_turn(ctx.loop->tokenizer(), ctx.loop->model_config().architecture, turn, r);
  attach_chat_images(ctx, turn, r);
  res.set_content(dump_json({{"input_tokens", r.prompt_ids.size()}}), "application/json");
}

void handle_messages(const ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const std::string model = check_model(ctx, body);
  auto turn = std::make_shared<ChatTurn>(read_messages_turn(body));
  engine::GenerationRequest request = read_request(ctx, body, *turn);
  read_traffic_class(body, req.get_header_value("X-Traffic-Class"), request);
  read_swa_restore(body, request);
  const std::string id = make_id("msg_");
  const bool stream = opt_bool(body, "stream", "").value_or(false);

  if (!stream) {
    respond_when_done(ctx, {request}, req, res, [=](const std::vector<Completion>& done) {
    const Completion& c = done[0];
    ParsedOutput parsed = parse_chat_output(*turn, c.text);
    json out = {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model},
                {"content", content_blocks(parsed)},
                {"stop_reason", stop_reason(c, !parsed.tool_calls.empty())},
                {"stop_sequence", c.matched_stop.empty() ? json(nullptr) : json(c.matched_stop)},
                {"usage", usage_json(c.prompt_tokens, c.completion_tokens, c.cached_tokens)}};
      return out;
    });
    return;
  }

  struct State {
    explicit State(const ChatTurn& turn) : output(turn) {}
    ChatOutputStream output;
    std::string text;
    size_t sent = 0, thinking_sent = 0;
    const char* open_block = nullptr;  // "text" | "thinking" | nullptr
    bool had_text_block = false;
    int blocks = 0;
    std::vector<int32_t> token_ids;
    bool started = false;  // message_start sent
  };
  auto state = std::make_shared<State>(*turn);
  // Sent with the first output, which carries the prompt's cached-token count, so that its
  // usage agrees with message_delta's.
  auto start = [=](SseWriter& sse, const engine::RequestOutput& first) {
    if (state->started) return true;
    state->started = true;
    const int prompt_tokens = first.prompt_tokens > 0 ? first.prompt_tokens : int(request.prompt_ids.size());
    json message = {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model},
                    {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                    {"usage", usage_json(prompt_tokens, 0, first.cached_tokens)}};
    return sse.event("message_start", {{"type", "message_start"}, {"message", message}}) &&
           sse.event("ping", {{"type", "ping"}});
  };
  StreamHandlers handlers;
  handlers.on_error = [](SseWriter& sse, int, const std::string& error) {
    return sse.event("error", {{"type", "error"},
                               {"error", {{"type", "api_error"}, {"message", "generation failed: " + error}}}});
  };
  auto close_block = [=](SseWriter& sse) {
    if (!state->open_block) return true;
    state->open_block = nullptr;
    return sse.event("content_block_stop", {{"type", "content_block_stop"}, {"index", state->blocks++}});
  };
  // Thinking and text arrive as consecutive blocks; a change of kind closes the open one.
  auto append = [=](SseWriter& sse, const char* kind, const std::string& delta) {
    const bool thinking = std::string_view(kind) == "thinking";
    if (!state->open_block || std::string_view(state->open_block) != kind) {
      if (!close_block(sse)) return false;
      state->open_block = kind;
      if (!thinking) state->had_text_block = true;
      json start = thinking ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                            : json{{"type", "text"}, {"text", ""}};
      if (!sse.event("content_block_start", {{"type", "content_block_start"}, {"index", state->blocks},
                                             {"content_block", start}}))
        return false;
    }
    if (delta.empty()) return true;
    json d = thinking ? json{{"type", "thinking_delta"}, {"thinking", delta}} : json{{"type", "text_delta"}, {"text", delta}};
    return sse.event("content_block_delta", {{"type", "content_block_delta"}, {"index", state->blocks}, {"delta", d}});
  };
  auto flush = [=](SseWriter& sse, const std::string& reasoning, const std::string& content) {
    if (reasoning.size() > state->thinking_sent) {
      if (!append(sse, "thinking", reasoning.substr(state->thinking_sent))) return false;
      state->thinking_sent = reasoning.size();
    }
    if (content.size() > state->sent) {
      if (!append(sse, "text", content.substr(state->sent))) return false;
      state->sent = content.size();
    }
    return true;
  };
  handlers.on_output = [=, &ctx](SseWriter& sse, int, const engine::RequestOutput& out) {
    if (!start(sse, out)) return false;
    state->text += out.new_text;
    state->token_ids.insert(state->token_ids.end(), out.new_token_ids.begin(), out.new_token_ids.end());
    state->output.push(out.new_text);
    if (!flush(sse, state->output.reasoning(), state->output.content())) return false;
    if (!out.finished) return true;
    const ParsedOutput parsed = state->output.finish();
    if (!flush(sse, parsed.reasoning_content, parsed.content)) return false;
    // Like the non-streaming reply: a text block unless the answer is only tool calls.
    if (parsed.tool_calls.empty() && !state->had_text_block && !append(sse, "text", "")) return false;
    if (!close_block(sse)) return false;
    for (const json& block : content_blocks(parsed)) {
      if (block["type"] != "tool_use") continue;
      json start = block;
      start["input"] = json::object();
      if (!sse.event("content_block_start", {{"type", "content_block_start"}, {"index", state->blocks}, {"content_block", start}}) ||
          !sse.event("content_block_delta", {{"type", "content_block_delta"}, {"index", state->blocks},
                                             {"delta", {{"type", "input_json_delta"}, {"partial_json", block["input"].dump()}}}}) ||
          !sse.event("content_block_stop", {{"type", "content_block_stop"}, {"index", state->blocks}}))
        return false;
      state->blocks += 1;
    }
    Completion c;
    c.finish_reason = out.finish_reason;
    c.matched_stop = find_matched_stop(ctx.loop->tokenizer(), state->token_ids, state->text, request.stop);
    json usage = usage_json(out.prompt_tokens, out.completion_tokens, out.cached_tokens);
    return sse.event("message_delta", {{"type", "message_delta"},
                                       {"delta", {{"stop_reason", stop_reason(c, !parsed.tool_calls.empty())},
                                                  {"stop_sequence", c.matched_stop.empty() ? json(nullptr) : json(c.matched_stop)}}},
                                       {"usage", usage}}) &&
           sse.event("message_stop", {{"type", "message_stop"}});
  };
  handlers.on_idle = [=](SseWriter& sse) {
    return state->started ? sse.event("ping", {{"type", "ping"}}) : sse.comment();
  };
  start_stream(ctx, {request}, std::move(handlers), req, res);
}

}  // namespace deepinfer::serve
