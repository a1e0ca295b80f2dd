#include "deepinfer/serve/stream_response.h"

#include <deque>

#include <httplib.h>

#include "deepinfer/serve/client_socket.h"

namespace deepinfer::serve {
namespace {

using Clock = std::chrono::steady_clock;
// How often a waiting handler looks at its client's socket: a client that left is noticed,
// and its sequence aborted, within about this long.
constexpr std::chrono::milliseconds kPollClient{200};

// Waits for the first output of any request. A request that fails before its first token (a
// grammar that does not compile) throws here, while the status can still be a 4xx. Returns
// -1 (and leaves `out` alone) when every request ended without output.
int wait_first_output(StreamGroup& group, const std::vector<engine::GenerationRequest>& requests,
                      const ClientSocket& client, engine::RequestOutput& out) {
  while (true) {
    const int i = group.next(out, kPollClient);
    if (i == -2) {
      if (client.gone()) {  // left while queued or in prefill: nobody will read the answer
        group.cancel_all();
        throw ApiError(499, "", "the client closed the connection", "client_closed");
      }
      continue;
    }
    if (i >= 0 && out.finished && !out.error.empty() && out.new_token_ids.empty())
      throw generation_error(requests[size_t(i)], true, out.error);
    return i;
  }
}

}  // namespace

void start_stream(const ServerContext& ctx, std::vector<engine::GenerationRequest> requests,
                  StreamHandlers handlers, const httplib::Request& req, httplib::Response& res) {
  const ClientSocket client = ClientSocket::of(req);
  auto group = std::make_shared<StreamGroup>(ctx, requests);
  auto pending = std::make_shared<std::deque<std::pair<int, engine::RequestOutput>>>();
  engine::RequestOutput first;
  if (const int i = wait_first_output(*group, requests, client, first); i >= 0)
    pending->emplace_back(i, std::move(first));
  auto shared = std::make_shared<StreamHandlers>(std::move(handlers));
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [group, pending, shared, client](size_t, httplib::DataSink& sink) {
        SseWriter sse(sink);
        auto gone = [&] {
          group->cancel_all();
          return false;
        };
        if (shared->on_start && !shared->on_start(sse)) return gone();
        auto last_write = Clock::now();
        while (true) {
          if (client.gone()) return gone();
          engine::RequestOutput out;
          int i;
          if (!pending->empty()) {
            i = pending->front().first;
            out = std::move(pending->front().second);
            pending->pop_front();
          } else {
            i = group->next(out, kPollClient);
          }
          if (i == -1) break;
          if (i == -2) {
            if (Clock::now() - last_write < std::chrono::seconds(1)) continue;
            const bool alive = shared->on_idle ? shared->on_idle(sse) : sse.comment();
            if (!alive) return gone();
            last_write = Clock::now();
            continue;
          }
          if (out.finished && out.finish_reason == engine::FinishReason::kAbort && !out.error.empty() &&
              out.error != kShuttingDown) {
            // Not an answer: the client must not take what came so far for a complete one.
            group->cancel_all();
            const bool ok = shared->on_error
                                ? shared->on_error(sse, i, out.error)
                                : sse.data(nlohmann::json::parse(openai_error_body(
                                      failed_generation(out.error))));
            if (!ok) return false;
            sse.done();
            return true;
          }
          if (!shared->on_output(sse, i, out)) return gone();
          last_write = Clock::now();
        }
        if (shared->on_end && !shared->on_end(sse)) return gone();
        sse.done();
        return true;
      },
      [group](bool) { group->cancel_all(); });
}

namespace {

// Adds one output to its request's Completion; returns the error text of a failed request.
std::string accumulate(const StreamGroup& group, int i, engine::RequestOutput& out, std::vector<Completion>& done) {
  Completion& c = done[size_t(i)];
  c.token_ids.insert(c.token_ids.end(), out.new_token_ids.begin(), out.new_token_ids.end());
  c.text += out.new_text;
  c.logprobs.insert(c.logprobs.end(), out.new_logprobs.begin(), out.new_logprobs.end());
  c.prompt_logprobs.insert(c.prompt_logprobs.end(), out.prompt_logprobs.begin(), out.prompt_logprobs.end());
  if (!out.finished) return "";
  c.finish_reason = out.finish_reason;
  c.prompt_tokens = out.prompt_tokens;
  c.completion_tokens = out.completion_tokens;
  c.cached_tokens = out.cached_tokens;
  c.replayed_tokens = out.replayed_tokens;
  c.matched_stop = group.matched_stop(i);
  // Ended by the server's stop: the reply holds what was generated, as a stream does.
  if (out.error == kShuttingDown) return "";
  return out.error;
}

}  // namespace

void respond_when_done(const ServerContext& ctx, std::vector<engine::GenerationRequest> requests,
                       const httplib::Request& req, httplib::Response& res,
                       std::function<nlohmann::json(const std::vector<Completion>&)> build) {
  const ClientSocket client = ClientSocket::of(req);
  auto group = std::make_shared<StreamGroup>(ctx, requests);
  auto done = std::make_shared<std::vector<Completion>>(requests.size());
  auto error = std::make_shared<std::string>();
  engine::RequestOutput first;
  if (const int i = wait_first_output(*group, requests, client, first); i >= 0)
    *error = accumulate(*group, i, first, *done);
  // With the socket found, polling notices a departed client and no blanks are written (a
  // client's read timeout still fires). Otherwise blanks go out every second, and the charset
  // parameter keeps cpp-httplib from gzip-compressing them into its buffer (it compresses
  // exactly "application/json"), so a failed write notices the departure.
  const bool blanks = !client.found();
  res.set_chunked_content_provider(
      blanks ? "application/json; charset=utf-8" : "application/json",
      [group, done, error, client, blanks, build = std::move(build)](size_t, httplib::DataSink& sink) {
        auto last_write = Clock::now();
        while (true) {
          engine::RequestOutput out;
          const int i = group->next(out, kPollClient);
          if (i == -1) break;
          if (client.gone()) {
            group->cancel_all();
            return false;
          }
          if (i >= 0) {
            std::string e = accumulate(*group, i, out, *done);
            if (error->empty()) *error = e;
          }
          if (blanks && Clock::now() - last_write >= std::chrono::seconds(1)) {
            if (!sink.write(" ", 1)) {  // the client is gone
              group->cancel_all();
              return false;
            }
            last_write = Clock::now();
          }
        }
        std::string body;
        if (!error->empty()) {
          body = openai_error_body(failed_generation(*error));
        } else {
          try {
            body = dump_json(build(*done));
          } catch (const ApiError& e) {
            body = openai_error_body(e);
          }
        }
        sink.write(body.data(), body.size());
        sink.done();
        return true;
      },
      [group](bool) { group->cancel_all(); });
}

}  // namespace deepinfer::serve
