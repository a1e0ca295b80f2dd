// POST /v1/responses and GET /v1/responses/{id} (OpenAI Responses): input items, instructions,
// function tools, text.format, previous_response_id over an in-memory LRU store, and the
// streaming event sequence the SDK checks.
#include <httplib.h>

#include "deepinfer/serve/image_input.h"
#include "deepinfer/serve/chat_prompt.h"
#include "deepinfer/serve/openai_common.h"
#include "deepinfer/serve/request_fields.h"
#include "deepinfer/serve/response_store.h"
#include "deepinfer/serve/routes.h"
#include "deepinfer/serve/stream_response.h"

namespace deepinfer::serve {
namespace {

using nlohmann::json;

// A content field into `msg`: a string, or a list of text and input_image parts.
void read_item_content(const json& content, const std::string& path, recipe::ChatMessage& msg) {
  if (content.is_string()) {
    msg.content = content.get<std::string>();
    return;
  }
  if (!content.is_array()) bad_request(path, "'{}' must be a string or a list of content parts", path);
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string p = fmt::format("{}[{}]", path, j);
    if (!content[j].is_object()) bad_request(p, "'{}' must be an object", p);
    const std::string type = req_string(content[j], "type", p);
    if (type == "input_text" || type == "output_text" || type == "text") {
      add_text_part(msg, req_string(content[j], "text", p));
    } else if (type == "input_image") {
      add_image_part(msg, *read_image_part(content[j], type, p));
    } else {
      bad_request(p + ".type", "content type '{}' at '{}' is not supported (input_text, input_image)", type, p);
    }
  }
  drop_text_only_parts(msg);
}

std::string item_text(const json& content, const std::string& path) {
  recipe::ChatMessage m;
  read_item_content(content, path, m);
  if (!m.parts.empty()) bad_request(path, "'{}' cannot hold images", path);
  return m.content;
}

void read_input(const json& body, std::vector<recipe::ChatMessage>& conversation) {
  const json* input = field(body, "input");
  if (!input) bad_request("input", "'input' is required");
  if (input->is_string()) {
    conversation.push_back({"user", input->get<std::string>()});
    return;
  }
  if (!input->is_array()) bad_request("input", "'input' must be a string or a list of items");
  std::string reasoning;  // a reasoning item's text, for the next assistant turn
  auto take_reasoning = [&](recipe::ChatMessage& m) {
    if (m.role == "assistant" && m.reasoning_content.empty()) m.reasoning_content = std::move(reasoning);
    reasoning.clear();
  };
  for (size_t i = 0; i < input->size(); ++i) {
    const std::string path = fmt::format("input[{}]", i);
    const json& it = (*input)[i];
    if (!it.is_object()) bad_request(path, "'{}' must be an object", path);
    const std::string type = opt_string(it, "type", path).value_or("message");
    if (type == "message") {
      std::string role = req_string(it, "role", path);
      if (role == "developer") role = "system";
      if (role != "user" && role != "assistant" && role != "system")
        bad_request(path + ".role", "'{}.role' must be user, assistant, system or developer, got '{}'", path, role);
      const json* content = field(it, "content");
      if (!content) bad_request(path + ".content", "'{}.content' is required", path);
      recipe::ChatMessage m{role, ""};
      read_item_content(*content, path + ".content", m);
      conversation.push_back(std::move(m));
      if (role == "assistant") take_reasoning(conversation.back());
    } else if (type == "function_call") {
      ToolCall call;
      call.id = req_string(it, "call_id", path);
      call.name = req_string(it, "name", path);
      call.arguments_json = opt_string(it, "arguments", path).value_or("{}");
      // Consecutive calls belong to one assistant turn.
      if (!conversation.empty() && conversation.back().role == "assistant" && !conversation.back().tool_calls_json.empty()) {
        json calls = json::parse(conversation.back().tool_calls_json);
        calls.push_back(json::parse(template_tool_calls_json({call}))[0]);
        conversation.back().tool_calls_json = calls.dump();
      } else {
        recipe::ChatMessage m{"assistant", ""};
        m.tool_calls_json = template_tool_calls_json({call});
        conversation.push_back(std::move(m));
      }
      take_reasoning(conversation.back());
    } else if (type == "function_call_output") {
      recipe::ChatMessage m{"tool", ""};
      m.tool_call_id = req_string(it, "call_id", path);
      const json* out = field(it, "output");
      if (!out) bad_request(path + ".output", "'{}.output' is required", path);
      m.content = out->is_string() ? out->get<std::string>() : item_text(*out, path + ".output");
      conversation.push_back(std::move(m));
    } else if (type == "reasoning") {
      // Its text goes with the assistant turn that follows (models that replay reasoning).
      if (const json* parts = field(it, "content"); parts && parts->is_array())
        for (const json& p : *parts)
          if (p.is_object() && p.value("type", "") == "reasoning_text" && p.contains("text") && p["text"].is_string())
            reasoning += p["text"].get<std::string>();
      continue;
    } else {
      bad_request(path + ".type", "input item type '{}' at '{}' is not supported", type, path);
    }
  }
  // A reasoning item after its turn's message (the order a reply may list them in).
  if (!reasoning.empty() && !conversation.empty()) take_reasoning(conversation.back());
}

void read_tools(const json& body, ChatTurn& turn) {
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) bad_request("tools", "'tools' must be a list");
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string p = fmt::format("tools[{}]", i);
      const json& t = (*tools)[i];
      if (!t.is_object()) bad_request(p, "'{}' must be an object", p);
      const std::string type = req_string(t, "type", p);
      if (type != "function") bad_request(p + ".type", "tool type '{}' is not supported (function tools only)", type);
      ToolSpec spec;
      spec.name = req_string(t, "name", p);
      spec.description = opt_string(t, "description", p).value_or("");
      if (const json* params = field(t, "parameters")) {
        if (!params->is_object()) bad_request(p + ".parameters", "'{}.parameters' must be a JSON Schema object", p);
        spec.parameters = *params;
      }
      turn.tools.push_back(std::move(spec));
    }
  }
  turn.tool_choice.mode = turn.tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (const json* tc = field(body, "tool_choice")) {
    if (tc->is_string()) {
      const std::string s = tc->get<std::string>();
      if (s == "none") turn.tool_choice.mode = ToolChoice::kNone;
      else if (s == "auto") turn.tool_choice.mode = ToolChoice::kAuto;
      else if (s == "required") turn.tool_choice.mode = ToolChoice::kRequired;
      else bad_request("tool_choice", "'tool_choice' must be none, auto, required or a function, got '{}'", s);
    } else if (tc->is_object()) {
      turn.tool_choice.mode = ToolChoice::kNamed;
      turn.tool_choice.name = req_string(*tc, "name", "tool_choice");
    } else {
      bad_request("tool_choice", "'tool_choice' must be a string or an object");
    }
    if (turn.tools.empty() && turn.tool_choice.mode != ToolChoice::kNone)
      bad_request("tool_choice", "'tool_choice' asks for a tool but 'tools' is empty");
  }
}

struct ResponseShell {
  std::string id;
  int64_t created = 0;
  std::string model;
  json request_echo;  // instructions, tools, text, ... as the SDK expects them back
};

json response_json(const ResponseShell& s, const std::string& status, const json& output, const json& usage,
                   const json& incomplete) {
  json r = {{"id", s.id}, {"object", "response"}, {"created_at", s.created}, {"status", status},
            {"model", s.model}, {"output", output}, {"usage", usage}, {"error", nullptr},
            {"incomplete_details", incomplete}};
  for (auto it = s.request_echo.begin(); it != s.request_echo.end(); ++it) r[it.key()] = it.value();
  return r;
}

json response_usage(int prompt, int completion, int cached) {
  return {{"input_tokens", prompt}, {"input_tokens_details", {{"cached_tokens", cached}}},
          {"output_tokens", completion}, {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", prompt + completion}};
}

json message_item(const std::string& id, const std::string& text, const std::string& status) {
  json content = json::array();
  if (status != "in_progress") content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}});
  return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", content}};
}

// The model's reasoning block, as the Responses API's reasoning item with its text.
json reasoning_item(const std::string& id, const std::string& text, const std::string& status) {
  json content = json::array();
  if (status != "in_progress") content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"type", "reasoning"}, {"id", id}, {"status", status}, {"summary", json::array()}, {"content", content}};
}

json call_item(const ToolCall& c, const std::string& status) {
  return {{"type", "function_call"}, {"id", "fc_" + c.id.substr(c.id.find('_') + 1)}, {"call_id", c.id},
          {"name", c.name}, {"arguments", c.arguments_json}, {"status", status}};
}

}  // namespace

void handle_get_response(const ServerContext& ctx, const std::string& id, httplib::Response& res) {
  auto stored = ctx.responses->get(id);
  if (!stored) throw ApiError(404, "response_id", fmt::format("no stored response with id '{}'", id), "not_found_error");
  res.set_content(dump_json(stored->response), "application/json");
}

void handle_responses(const ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  ResponseShell shell;
  shell.model = check_model(ctx, body);
  shell.id = make_id("resp_");
  shell.created = unix_now();

  auto turn = std::make_shared<ChatTurn>();
  std::vector<recipe::ChatMessage> conversation;  // what a later previous_response_id inherits
  const auto previous = opt_string(body, "previous_response_id", "");
  if (previous) {
    auto stored = ctx.responses->get(*previous);
    if (!stored)
      throw ApiError(404, "previous_response_id", fmt::format("previous_response_id '{}' is not a stored response", *previous),
                     "not_found_error");
    conversation = stored->conversation;
  }
  read_input(body, conversation);
  const auto instructions = opt_string(body, "instructions", "");
  if (instructions && !instructions->empty()) turn->messages.push_back({"system", *instructions});
  turn->messages.insert(turn->messages.end(), conversation.begin(), conversation.end());
  read_tools(body, *turn);
  // reasoning.effort: any effort but none/minimal switches on the model's thinking mode
  // (DeepSeek V3.1 / R1 formats; others refuse it).
  if (const json* reasoning = field(body, "reasoning")) {
    if (!reasoning->is_object()) bad_request("reasoning", "'reasoning' must be an object");
    if (auto effort = opt_string(*reasoning, "effort", "reasoning")) {
      if (*effort != "none" && *effort != "minimal" && *effort != "low" && *effort != "medium" && *effort != "high" &&
          *effort != "xhigh" && *effort != "max")
        bad_request("reasoning.effort", "'reasoning.effort' must be none, minimal, low, medium, high, xhigh or max, got '{}'",
                    *effort);
      turn->thinking = *effort != "none" && *effort != "minimal";
      turn->thinking_param = "reasoning.effort";
      turn->reasoning_effort = *effort;
      turn->reasoning_effort_param = "reasoning.effort";
    }
  }

  engine::GenerationRequest request;
  read_sampling(body, request);
  read_traffic_class(body, req.get_header_value("X-Traffic-Class"), request);
  read_swa_restore(body, request);
  request.max_tokens = read_max_tokens(body, {"max_output_tokens"}, 0);
  json text_echo = {{"format", {{"type", "text"}}}};
  if (const json* text = field(body, "text")) {
    if (!text->is_object()) bad_request("text", "'text' must be an object");
    if (const json* format = field(*text, "format")) {
      read_response_format(*format, "text.format", true, request);
      text_echo["format"] = *format;
    }
  }
  check_chat_images(ctx, *turn);
  encode_chat_turn(ctx.loop->tokenizer(), ctx.loop->model_config().architecture, *turn, request);
  attach_chat_images(ctx, *turn, request);
  if (request.max_tokens == 0) request.max_tokens = engine::GenerationRequest::kUntilContextEnd;  // the engine clamps
  check_length(ctx, request, "input");
  const bool store = opt_bool(body, "store", "").value_or(true);
  const bool stream = opt_bool(body, "stream", "").value_or(false);

  json tools_echo = json::array();
  for (const ToolSpec& t : turn->tools)
    tools_echo.push_back({{"type", "function"}, {"name", t.name}, {"description", t.description},
                          {"parameters", t.parameters}, {"strict", false}});
  const char* choice_names[] = {"auto", "none", "required", "required"};
  shell.request_echo = {
      {"instructions", instructions ? json(*instructions) : json(nullptr)},
      {"max_output_tokens", field(body, "max_output_tokens") ? json(request.max_tokens) : json(nullptr)},
      {"temperature", request.sampling.temperature}, {"top_p", request.sampling.top_p},
      {"tools", tools_echo},
      {"tool_choice", turn->tool_choice.mode == ToolChoice::kNamed
                          ? json{{"type", "function"}, {"name", turn->tool_choice.name}}
                          : json(choice_names[turn->tool_choice.mode])},
      {"parallel_tool_calls", true}, {"text", text_echo}, {"store", store},
      {"previous_response_id", previous ? json(*previous) : json(nullptr)},
      {"metadata", field(body, "metadata") ? body["metadata"] : json::object()}, {"truncation", "disabled"}};

  // Builds the final output items and stores the response (with its conversation) when asked.
  auto finish = [ctx_responses = ctx.responses, shell, turn, conversation, store](
                    const std::string& text, engine::FinishReason reason, int prompt, int completion, int cached,
                    const std::string& msg_id, const std::string& rs_id, bool reasoning_first,
                    std::vector<ToolCall>* calls_out) {
    ParsedOutput parsed = parse_chat_output(*turn, text);
    // Cut by max_output_tokens or by the server's stop: incomplete, with the reason. The text
    // items of a response that did not complete are incomplete too (a tool call is only ever
    // output whole).
    const bool cut = reason == engine::FinishReason::kLength || reason == engine::FinishReason::kAbort;
    const char* text_status = cut || reason == engine::FinishReason::kGrammarDeadEnd ? "incomplete" : "completed";
    json output = json::array();
    const bool reasoning = !parsed.reasoning_content.empty();
    if (reasoning && reasoning_first) output.push_back(reasoning_item(rs_id, parsed.reasoning_content, text_status));
    if (!parsed.content.empty() || parsed.tool_calls.empty()) output.push_back(message_item(msg_id, parsed.content, text_status));
    if (reasoning && !reasoning_first) output.push_back(reasoning_item(rs_id, parsed.reasoning_content, text_status));
    for (const ToolCall& c : parsed.tool_calls) output.push_back(call_item(c, "completed"));
    const char* why = reason == engine::FinishReason::kLength ? "max_output_tokens" : "server_shutdown";
    json r = response_json(shell, cut ? "incomplete" : "completed", output, response_usage(prompt, completion, cached),
                           cut ? json{{"reason", why}} : json(nullptr));
    if (reason == engine::FinishReason::kGrammarDeadEnd) {  // never reported as completed
      r["status"] = "failed";
      r["error"] = {{"code", "grammar_dead_end"},
                    {"message", "the output format allowed no next token; the output so far is incomplete"}};
    }
    if (store) {
      StoredResponse sr;
      sr.response = r;
      sr.conversation = conversation;
      recipe::ChatMessage reply{"assistant", parsed.content};
      reply.reasoning_content = parsed.reasoning_content;
      if (!parsed.tool_calls.empty()) reply.tool_calls_json = template_tool_calls_json(parsed.tool_calls);
      sr.conversation.push_back(std::move(reply));
      ctx_responses->put(shell.id, std::move(sr));
    }
    if (calls_out) *calls_out = parsed.tool_calls;
    return r;
  };

  const std::string msg_id = make_id("msg_");
  const std::string rs_id = make_id("rs_");
  if (!stream) {
    respond_when_done(ctx, {request}, req, res, [=](const std::vector<Completion>& done) {
    const Completion& c = done[0];
    json r = finish(c.text, c.finish_reason, c.prompt_tokens, c.completion_tokens, c.cached_tokens, msg_id, rs_id,
                    true, nullptr);
      return r;
    });
    return;
  }

  struct State {
    explicit State(const ChatTurn& turn) : output(turn) {}
    ChatOutputStream output;  // what can be streamed now (finish() parses the whole text below)
    int seq = 0;
    std::string text;
    size_t sent = 0, reasoning_sent = 0;
    // Output items get their index when they open, in the order they open (a reasoning block
    // usually comes first); the final output keeps that order.
    int next_index = 0, message_index = -1, reasoning_index = -1;
    bool message_open() const { return message_index >= 0; }
    bool reasoning_open() const { return reasoning_index >= 0; }
  };
  auto state = std::make_shared<State>(*turn);
  auto emit = [state](SseWriter& sse, const std::string& type, json payload) {
    payload["type"] = type;
    payload["sequence_number"] = state->seq++;
    return sse.event(type, payload);
  };
  auto open_reasoning = [=](SseWriter& sse) {
    if (state->reasoning_open()) return true;
    state->reasoning_index = state->next_index++;
    return emit(sse, "response.output_item.added",
                {{"output_index", state->reasoning_index}, {"item", reasoning_item(rs_id, "", "in_progress")}});
  };
  auto reasoning_delta = [=](SseWriter& sse, const std::string& reasoning) {
    if (reasoning.size() <= state->reasoning_sent) return true;
    if (!open_reasoning(sse)) return false;
    const std::string delta = reasoning.substr(state->reasoning_sent);
    state->reasoning_sent = reasoning.size();
    return emit(sse, "response.reasoning_text.delta",
                {{"item_id", rs_id}, {"output_index", state->reasoning_index}, {"content_index", 0}, {"delta", delta}});
  };
  auto open_message = [=](SseWriter& sse) {
    if (state->message_open()) return true;
    state->message_index = state->next_index++;
    return emit(sse, "response.output_item.added",
                {{"output_index", state->message_index}, {"item", message_item(msg_id, "", "in_progress")}}) &&
           emit(sse, "response.content_part.added",
                {{"item_id", msg_id}, {"output_index", state->message_index}, {"content_index", 0},
                 {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}, {"logprobs", json::array()}}}});
  };
  StreamHandlers handlers;
  handlers.on_error = [](SseWriter& sse, int, const std::string& error) {
    const std::string message = "generation failed: " + error;
    return sse.event("error", {{"type", "error"}, {"code", "server_error"}, {"message", message}, {"param", nullptr},
                               {"error", {{"type", "server_error"}, {"message", message}}}});
  };
  handlers.on_start = [=](SseWriter& sse) {
    json r = response_json(shell, "in_progress", json::array(), nullptr, nullptr);
    return emit(sse, "response.created", {{"response", r}}) && emit(sse, "response.in_progress", {{"response", r}});
  };
  handlers.on_output = [=](SseWriter& sse, int, const engine::RequestOutput& out) {
    state->text += out.new_text;
    state->output.push(out.new_text);
    if (!reasoning_delta(sse, state->output.reasoning())) return false;
    const std::string& content = state->output.content();
    if (content.size() > state->sent) {
      if (!open_message(sse)) return false;
      if (!emit(sse, "response.output_text.delta",
                {{"item_id", msg_id}, {"output_index", state->message_index}, {"content_index", 0},
                 {"delta", content.substr(state->sent)}, {"logprobs", json::array()}}))
        return false;
      state->sent = content.size();
    }
    if (!out.finished) return true;
    std::vector<ToolCall> calls;
    const bool reasoning_first = !state->message_open() || state->reasoning_open();
    json r = finish(state->text, out.finish_reason, out.prompt_tokens, out.completion_tokens, out.cached_tokens, msg_id,
                    rs_id, reasoning_first, &calls);
    int index = 0;
    for (const json& item : r["output"]) {
      if (item["type"] == "reasoning") {
        const std::string full = item["content"][0]["text"];
        if (!reasoning_delta(sse, full) ||
            !emit(sse, "response.reasoning_text.done",
                  {{"item_id", rs_id}, {"output_index", index}, {"content_index", 0}, {"text", full}}) ||
            !emit(sse, "response.output_item.done", {{"output_index", index}, {"item", item}}))
          return false;
      } else if (item["type"] == "message") {
        const std::string full = item["content"][0]["text"];
        if (!open_message(sse)) return false;
        if (full.size() > state->sent &&
            !emit(sse, "response.output_text.delta",
                  {{"item_id", msg_id}, {"output_index", index}, {"content_index", 0},
                   {"delta", full.substr(std::min(state->sent, full.size()))}, {"logprobs", json::array()}}))
          return false;
        if (!emit(sse, "response.output_text.done", {{"item_id", msg_id}, {"output_index", index}, {"content_index", 0},
                                                     {"text", full}, {"logprobs", json::array()}}) ||
            !emit(sse, "response.content_part.done", {{"item_id", msg_id}, {"output_index", index}, {"content_index", 0},
                                                      {"part", item["content"][0]}}) ||
            !emit(sse, "response.output_item.done", {{"output_index", index}, {"item", item}}))
          return false;
      } else {
        json added = item;
        added["arguments"] = "";
        added["status"] = "in_progress";
        const std::string item_id = item["id"];
        if (!emit(sse, "response.output_item.added", {{"output_index", index}, {"item", added}}) ||
            !emit(sse, "response.function_call_arguments.delta",
                  {{"item_id", item_id}, {"output_index", index}, {"delta", item["arguments"]}}) ||
            !emit(sse, "response.function_call_arguments.done",
                  {{"item_id", item_id}, {"output_index", index}, {"arguments", item["arguments"]}, {"name", item["name"]}}) ||
            !emit(sse, "response.output_item.done", {{"output_index", index}, {"item", item}}))
          return false;
      }
      ++index;
    }
    const std::string status = r["status"];
    return emit(sse,
                status == "completed" ? "response.completed"
                : status == "failed"  ? "response.failed"
                                      : "response.incomplete",
                {{"response", r}});
  };
  start_stream(ctx, {request}, std::move(handlers), req, res);
}

}  // namespace deepinfer::serve
