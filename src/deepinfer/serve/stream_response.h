// Drives one SSE response: submit the requests, wait for the first output while the status can
// still be an error, then stream every output through the API family's handlers. A write that
// fails (client gone) cancels the requests at once, which frees their KV blocks.
#pragma once

#include <functional>
#include <vector>

#include "deepinfer/engine/request.h"
#include "deepinfer/serve/server_context.h"

namespace httplib {
struct Request;
struct Response;
}

namespace deepinfer::serve {

struct StreamHandlers {
  // Each returns false when the client is gone.
  std::function<bool(SseWriter&)> on_start;
  std::function<bool(SseWriter&, int index, const engine::RequestOutput& out)> on_output;
  std::function<bool(SseWriter&)> on_end;
  // Sent every second while no output arrives (default: an SSE comment).
  std::function<bool(SseWriter&)> on_idle;
  // A request failed after its first token (an engine error, a decode engine that died): the
  // stream ends with this instead of on_end, never with a normal finish. Default: OpenAI's
  // `data: {"error": {...}}` chunk (the SDKs raise it).
  std::function<bool(SseWriter&, int index, const std::string& error)> on_error;
};

void start_stream(const ServerContext& ctx, std::vector<engine::GenerationRequest> requests,
                  StreamHandlers handlers, const httplib::Request& req, httplib::Response& res);

// A non-streaming response: waits for the first output (errors before it are still 4xx),
// then sends the JSON that `build` makes from the finished requests. While it waits it writes
// a blank (JSON allows leading whitespace) every second, so a client that left is noticed and
// its requests are cancelled, as for streams. Both also poll the client's socket (whatever
// the reply's encoding) and cancel within a fraction of a second of a disconnect.
void respond_when_done(const ServerContext& ctx, std::vector<engine::GenerationRequest> requests,
                       const httplib::Request& req, httplib::Response& res,
                       std::function<nlohmann::json(const std::vector<Completion>&)> build);

}  // namespace deepinfer::serve
