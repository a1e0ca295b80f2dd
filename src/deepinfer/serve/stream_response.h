// Drives one SSE response: submit the requests, wait for the first output while the status can
// still be an error, then stream every output through the API family's handlers. A write that
// fails (client gone) cancels the requests at once, which frees their KV blocks.
#pragma once

#include <functional>
#include <vector>

#include "deepinfer/engine/request.h"
#include "deepinfer/serve/server_context.h"

namespace httplib {
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
};

void start_stream(const ServerContext& ctx, std::vector<engine::GenerationRequest> requests,
                  StreamHandlers handlers, httplib::Response& res);

}  // namespace deepinfer::serve
