#include "deepinfer/serve/server_context.h"

#include <chrono>
#include <random>

#include <httplib.h>

namespace deepinfer::serve {

using nlohmann::json;

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Length and the allowed range of the second byte (no overlongs, surrogates or > U+10FFFF).
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return i;
    if (i + size_t(len) > s.size()) return i;
    for (int k = 1; k < len; ++k) {
      const unsigned char b = static_cast<unsigned char>(s[i + size_t(k)]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
    }
    i += size_t(len);
  }
  return std::string::npos;
}

json parse_body(const std::string& body) {
  // Checked before parsing so the error names the place (the parser's own message would quote
  // the bad bytes, which cannot go into a JSON reply).
  if (const size_t bad = first_invalid_utf8(body); bad != std::string::npos)
    bad_request("", "the request body is not valid UTF-8: byte 0x{:02X} at offset {} does not start a valid "
                "UTF-8 sequence",
                static_cast<unsigned char>(body[bad]), bad);
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    bad_request("", "the request body is not valid JSON: {}", e.what());
  }
  if (!j.is_object()) bad_request("", "the request body must be a JSON object, got {}", j.type_name());
  return j;
}

std::string check_model(const ServerContext& ctx, const json& body) {
  auto model = opt_string(body, "model", "");
  if (!model || model->empty())
    bad_request("model", "'model' is required (this server serves '{}')", ctx.model_name);
  if (*model != ctx.model_name)
    throw ApiError(404, "model", fmt::format("the model '{}' does not exist; this server serves '{}'", *model,
                                             ctx.model_name),
                   "not_found_error");
  return ctx.model_name;
}

std::string make_id(const std::string& prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), uint32_t(rng()));
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void check_length(const ServerContext& ctx, const engine::GenerationRequest& r, const std::string& param) {
  const int64_t prompt = int64_t(r.prompt_ids.size());
  if (ctx.max_model_len <= 0) return;
  if (prompt >= ctx.max_model_len)
    bad_request(param, "the prompt is {} tokens long; this model's maximum context length is {} tokens",
                prompt, ctx.max_model_len);
  if (r.max_tokens != engine::GenerationRequest::kUntilContextEnd && prompt + r.max_tokens > ctx.max_model_len)
    bad_request(param,
                "this model's maximum context length is {} tokens, but {} prompt tokens + {} output "
                "tokens were requested; lower the maximum number of output tokens",
                ctx.max_model_len, prompt, r.max_tokens);
}

std::string find_matched_stop(const recipe::Tokenizer& tok, const std::vector<int32_t>& token_ids,
                              const std::string& text, const std::vector<std::string>& stops) {
  if (stops.empty()) return "";
  const std::string full = tok.decode(token_ids, /*skip_special=*/true);
  for (const std::string& s : stops)
    if (full.compare(text.size(), s.size(), s) == 0) return s;
  for (const std::string& s : stops)
    if (full.find(s, text.size() > s.size() ? text.size() - s.size() : 0) != std::string::npos) return s;
  return "";
}

ApiError generation_error(const engine::GenerationRequest& request, bool before_first_token,
                          const std::string& error) {
  // A grammar that fails to compile ends its request before any token: the request's fault.
  if (request.grammar && before_first_token)
    return ApiError(400, "", "the requested output format cannot be used: " + error);
  return failed_generation(error);
}

ApiError failed_generation(const std::string& error) {
  if (error.rfind(kServiceUnavailable, 0) == 0)
    return ApiError(503, "", "generation failed: " + error, "overloaded_error");
  return ApiError(500, "", "generation failed: " + error, "server_error");
}

StreamGroup::StreamGroup(const ServerContext& ctx, const std::vector<engine::GenerationRequest>& requests)
    : ctx_(ctx), in_progress_(ctx.in_progress), requests_(requests), done_(requests.size(), false),
      tokens_(requests.size()), texts_(requests.size()) {
  for (size_t i = 0; i < requests.size(); ++i) {
    auto s = ctx.loop->submit(requests[i]);
    if (!s.is_ok()) {
      cancel_all();
      throw api_error_from_status(s.status());
    }
    streams_.push_back(std::move(s).value());
  }
}

StreamGroup::~StreamGroup() { cancel_all(); }

void StreamGroup::cancel_all() {
  for (size_t i = 0; i < streams_.size(); ++i)
    if (!done_[i]) streams_[i]->cancel();
}

int StreamGroup::next(engine::RequestOutput& out, std::chrono::milliseconds timeout) {
  const size_t n = streams_.size();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    size_t first_open = n;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (cursor_ + k) % n;
      if (done_[i]) continue;
      if (first_open == n) first_open = i;
      if (streams_[i]->next(out, std::chrono::milliseconds(0)) == RequestStream::Next::kOutput) {
        cursor_ = i + 1;
        tokens_[i].insert(tokens_[i].end(), out.new_token_ids.begin(), out.new_token_ids.end());
        texts_[i] += out.new_text;
        if (out.finished) done_[i] = true;
        return int(i);
      }
    }
    if (first_open == n) return -1;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return -2;
    // Wait on one open stream; others are picked up on the next pass (n is small).
    const auto wait = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
                               std::chrono::milliseconds(n == 1 ? 1000 : 5));
    if (streams_[first_open]->next(out, wait) == RequestStream::Next::kOutput) {
      const size_t i = first_open;
      tokens_[i].insert(tokens_[i].end(), out.new_token_ids.begin(), out.new_token_ids.end());
      texts_[i] += out.new_text;
      if (out.finished) done_[i] = true;
      return int(i);
    }
  }
}

std::string StreamGroup::matched_stop(int i) const {
  if (requests_[size_t(i)].stop.empty()) return "";
  return find_matched_stop(ctx_.loop->tokenizer(), tokens_[size_t(i)], texts_[size_t(i)],
                           requests_[size_t(i)].stop);
}

bool SseWriter::raw(const std::string& text) { return sink_.write(text.data(), text.size()); }
bool SseWriter::data(const json& j) { return raw("data: " + dump_json(j) + "\n\n"); }
bool SseWriter::event(const std::string& name, const json& j) {
  return raw("event: " + name + "\ndata: " + dump_json(j) + "\n\n");
}
bool SseWriter::comment() { return raw(": keep-alive\n\n"); }
void SseWriter::done() { sink_.done(); }

}  // namespace deepinfer::serve
