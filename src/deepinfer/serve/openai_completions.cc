// POST /v1/completions (OpenAI legacy Completions): prompt as text, a list of texts, token ids
// or a list of token-id lists; streaming or not.
#include <httplib.h>

#include "deepinfer/serve/openai_common.h"
#include "deepinfer/serve/request_fields.h"
#include "deepinfer/serve/routes.h"
#include "deepinfer/serve/stream_response.h"

namespace deepinfer::serve {
namespace {

using nlohmann::json;

std::vector<int32_t> read_token_ids(const json& arr, int32_t vocab_size, const std::string& path) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_number_integer() || arr[i].get<int64_t>() < 0 || arr[i].get<int64_t>() >= vocab_size)
      bad_request(path, "'{}[{}]' must be a token id in [0, {})", path, i, vocab_size);
    ids.push_back(int32_t(arr[i].get<int64_t>()));
  }
  return ids;
}

// The prompts of a request, as token ids (text gets BOS when the tokenizer asks for it).
std::vector<std::vector<int32_t>> read_prompts(const json& body, const recipe::Tokenizer& tok) {
  const json* p = field(body, "prompt");
  if (!p) bad_request("prompt", "'prompt' is required");
  auto encode = [&](const std::string& text) {
    std::vector<int32_t> ids;
    if (tok.add_bos() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
    auto body_ids = tok.encode(text, /*allow_special=*/false);
    ids.insert(ids.end(), body_ids.begin(), body_ids.end());
    return ids;
  };
  std::vector<std::vector<int32_t>> prompts;
  if (p->is_string()) {
    prompts.push_back(encode(p->get<std::string>()));
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    prompts.push_back(read_token_ids(*p, tok.vocab_size(), "prompt"));
  } else if (p->is_array() && !p->empty()) {
    for (size_t i = 0; i < p->size(); ++i) {
      const json& x = (*p)[i];
      const std::string path = fmt::format("prompt[{}]", i);
      if (x.is_string()) prompts.push_back(encode(x.get<std::string>()));
      else if (x.is_array()) prompts.push_back(read_token_ids(x, tok.vocab_size(), path));
      else bad_request(path, "'{}' must be a string or a list of token ids", path);
    }
  } else {
    bad_request("prompt", "'prompt' must be a string, a list of strings or a list of token ids");
  }
  if (prompts.size() > 64) bad_request("prompt", "at most 64 prompts per request, got {}", prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    if (prompts[i].empty()) bad_request("prompt", "prompt {} is empty", i);
  return prompts;
}

// `echo` with `logprobs`: the prompt tokens first (the first has no logprob: null, as OpenAI
// answers), then the generated ones (`generated`, a completion_logprobs object).
json echo_logprobs(const recipe::Tokenizer& tok, const std::vector<int32_t>& prompt,
                   const std::vector<engine::LogprobEntry>& scored, const json& generated) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string& bytes = tok.token_bytes(prompt[i]);
    tokens.push_back(bytes);
    offsets.push_back(offset);
    offset += bytes.size();
    if (i == 0 || i > scored.size()) {
      lps.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    const engine::LogprobEntry& e = scored[i - 1];
    lps.push_back(e.logprob);
    json top = json::object();
    for (const auto& [id, lp] : e.top) top[tok.token_bytes(id)] = lp;
    tops.push_back(std::move(top));
  }
  auto append = [&](json& dst, const char* key) {
    for (const json& x : generated.at(key)) dst.push_back(x);
  };
  append(tokens, "tokens");
  append(lps, "token_logprobs");
  append(tops, "top_logprobs");
  append(offsets, "text_offset");
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

}  // namespace

void handle_completions(const ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const std::string model = check_model(ctx, body);
  const recipe::Tokenizer& tok = ctx.loop->tokenizer();
  const auto prompts = read_prompts(body, tok);

  engine::GenerationRequest base;
  read_sampling(body, base);
  read_traffic_class(body, req.get_header_value("X-Traffic-Class"), base);
  read_swa_restore(body, base);
  read_stop(body, "stop", base);
  read_logit_bias(body, tok.vocab_size(), base);
  base.max_tokens = read_max_tokens(body, {"max_tokens"}, 16);
  const int n = int(opt_int(body, "n", "", 1, 16).value_or(1));
  const auto logprobs = opt_int(body, "logprobs", "", 0, 20);
  if (logprobs) base.sampling.logprobs = int(*logprobs);
  const bool echo = opt_bool(body, "echo", "").value_or(false);
  // The prompt tokens' logprobs too: such requests compute their whole prompt (no prefix cache).
  const bool echo_logprobs_wanted = echo && logprobs;
  if (echo_logprobs_wanted) base.prompt_logprobs = int(*logprobs);
  if (field(body, "suffix")) bad_request("suffix", "'suffix' is not supported");
  if (auto bo = opt_int(body, "best_of", "", 1, 16); bo && *bo != n)
    bad_request("best_of", "'best_of' other than n is not supported");
  if (const json* rf = field(body, "response_format")) read_response_format(*rf, "response_format", false, base);
  const bool stream = opt_bool(body, "stream", "").value_or(false);
  bool include_usage = false;
  if (const json* so = field(body, "stream_options")) include_usage = opt_bool(*so, "include_usage", "stream_options").value_or(false);

  // Choice index = prompt * n + sample, as OpenAI numbers them.
  std::vector<engine::GenerationRequest> requests;
  std::vector<std::string> echoes;
  std::vector<std::vector<int32_t>> choice_prompts;  // [choices] the prompt of each
  for (const auto& ids : prompts) {
    engine::GenerationRequest r = base;
    r.prompt_ids = ids;
    check_length(ctx, r, "prompt");
    for (auto& x : fan_out(r, n)) {
      requests.push_back(std::move(x));
      echoes.push_back(echo ? tok.decode(ids, /*skip_special=*/true) : "");
      choice_prompts.push_back(ids);
    }
  }
  const std::string id = make_id("cmpl-");
  const int64_t created = unix_now();

  if (!stream) {
    respond_when_done(ctx, requests, req, res, [=, &tok](const std::vector<Completion>& done) {
    json choices = json::array();
    int prompt_tokens = 0, completion_tokens = 0, cached = 0, replayed = 0;
    for (size_t i = 0; i < done.size(); ++i) {
      const Completion& c = done[i];
      if (i % size_t(n) == 0) {
        prompt_tokens += c.prompt_tokens;
        cached += c.cached_tokens;
        replayed += c.replayed_tokens;
      }
      completion_tokens += c.completion_tokens;
      json choice = {{"index", i}, {"text", echoes[i] + c.text}, {"logprobs", nullptr},
                     {"finish_reason", openai_finish_reason(c.finish_reason)}};
      if (logprobs) choice["logprobs"] = completion_logprobs(tok, c.logprobs, echoes[i].size());
      if (echo_logprobs_wanted)
        choice["logprobs"] = echo_logprobs(tok, choice_prompts[i], c.prompt_logprobs, choice["logprobs"]);
      choices.push_back(std::move(choice));
    }
    json out = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                {"choices", choices}, {"system_fingerprint", nullptr},
                {"usage", openai_usage(prompt_tokens, completion_tokens, cached, replayed)}};
      return out;
    });
    return;
  }

  struct State {
    std::vector<size_t> text_len;
    std::vector<bool> echo_pending;  // echo with logprobs: the echo goes out with the first tokens
    int prompt_tokens = 0, completion_tokens = 0, cached = 0, replayed = 0;
  };
  auto state = std::make_shared<State>();
  state->text_len.assign(requests.size(), 0);
  state->echo_pending.assign(requests.size(), echo_logprobs_wanted);
  auto chunk = [=](json choice) {
    json c = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
              {"system_fingerprint", nullptr}, {"choices", json::array({std::move(choice)})}};
    if (include_usage) c["usage"] = nullptr;
    return c;
  };
  StreamHandlers handlers;
  handlers.on_start = [=](SseWriter& sse) {
    for (size_t i = 0; i < echoes.size(); ++i) {
      if (echoes[i].empty() || echo_logprobs_wanted) continue;
      state->text_len[i] = echoes[i].size();
      if (!sse.data(chunk({{"index", i}, {"text", echoes[i]}, {"logprobs", nullptr}, {"finish_reason", nullptr}})))
        return false;
    }
    return true;
  };
  handlers.on_output = [=, &tok](SseWriter& sse, int i, const engine::RequestOutput& out) {
    json choice = {{"index", i}, {"text", out.new_text}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    const bool with_echo = state->echo_pending[size_t(i)] && (!out.new_token_ids.empty() || out.finished);
    if (with_echo) {
      // The prompt's logprobs arrive with the first generated token: the echo waits for them.
      state->echo_pending[size_t(i)] = false;
      choice["text"] = echoes[size_t(i)] + out.new_text;
      state->text_len[size_t(i)] = echoes[size_t(i)].size();
    }
    if (logprobs && (!out.new_logprobs.empty() || with_echo))
      choice["logprobs"] = completion_logprobs(tok, out.new_logprobs, state->text_len[size_t(i)]);
    if (with_echo)
      choice["logprobs"] = echo_logprobs(tok, choice_prompts[size_t(i)], out.prompt_logprobs, choice["logprobs"]);
    state->text_len[size_t(i)] += out.new_text.size();
    if (out.finished) {
      choice["finish_reason"] = openai_finish_reason(out.finish_reason);
      if (size_t(i) % size_t(n) == 0) {
        state->prompt_tokens += out.prompt_tokens;
        state->cached += out.cached_tokens;
        state->replayed += out.replayed_tokens;
      }
      state->completion_tokens += out.completion_tokens;
    }
    if (out.new_text.empty() && !out.finished && !with_echo) return true;
    return sse.data(chunk(choice));
  };
  handlers.on_end = [=](SseWriter& sse) {
    if (include_usage) {
      json c = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                {"choices", json::array()},
                {"usage", openai_usage(state->prompt_tokens, state->completion_tokens, state->cached,
                                       state->replayed)}};
      if (!sse.data(c)) return false;
    }
    return sse.raw("data: [DONE]\n\n");
  };
  start_stream(ctx, std::move(requests), std::move(handlers), req, res);
}

}  // namespace deepinfer::serve
