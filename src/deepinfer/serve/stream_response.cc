#include "deepinfer/serve/stream_response.h"

#include <deque>

#include <httplib.h>

namespace deepinfer::serve {

void start_stream(const ServerContext& ctx, std::vector<engine::GenerationRequest> requests,
                  StreamHandlers handlers, httplib::Response& res) {
  auto group = std::make_shared<StreamGroup>(ctx, requests);
  // The first output decides the status: a request that fails before any token (a grammar that
  // does not compile) is still a 4xx.
  auto pending = std::make_shared<std::deque<std::pair<int, engine::RequestOutput>>>();
  while (true) {
    engine::RequestOutput out;
    const int i = group->next(out, std::chrono::milliseconds(1000));
    if (i == -2) continue;
    if (i == -1) break;
    if (out.finished && !out.error.empty() && out.new_token_ids.empty())
      throw generation_error(requests[size_t(i)], true, out.error);
    pending->emplace_back(i, std::move(out));
    break;
  }
  auto shared = std::make_shared<StreamHandlers>(std::move(handlers));
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [group, pending, shared](size_t, httplib::DataSink& sink) {
        SseWriter sse(sink);
        auto gone = [&] {
          group->cancel_all();
          return false;
        };
        if (shared->on_start && !shared->on_start(sse)) return gone();
        while (true) {
          engine::RequestOutput out;
          int i;
          if (!pending->empty()) {
            i = pending->front().first;
            out = std::move(pending->front().second);
            pending->pop_front();
          } else {
            i = group->next(out, std::chrono::milliseconds(1000));
          }
          if (i == -1) break;
          if (i == -2) {
            const bool alive = shared->on_idle ? shared->on_idle(sse) : sse.comment();
            if (!alive) return gone();
            continue;
          }
          if (!shared->on_output(sse, i, out)) return gone();
        }
        if (shared->on_end && !shared->on_end(sse)) return gone();
        sse.done();
        return true;
      },
      [group](bool) { group->cancel_all(); });
}

}  // namespace deepinfer::serve
