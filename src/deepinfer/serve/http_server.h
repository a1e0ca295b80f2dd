// `deepinfer serve`: cpp-httplib on a thread pool (one thread per open connection, so
// hundreds of idle streaming clients cost stack, not CPU), routes for the OpenAI and Anthropic
// APIs, API-key checks, body limits, and a graceful stop on SIGINT/SIGTERM.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/serve/engine_loop.h"
#include "deepinfer/vision/image_service.h"

namespace httplib {
class Server;
}

namespace deepinfer::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                // 0 = any free port (reported through on_listening)
  std::string api_key;            // empty = no key needed
  std::string served_model_name;  // the name clients send as "model"
  size_t max_body_bytes = size_t{16} << 20;
  int http_threads = 512;         // concurrent connections served at once
  int read_timeout_seconds = 60;  // a client that sends nothing for this long is dropped
  int max_responses_stored = 1000;  // Responses API objects kept for previous_response_id (LRU)
  int listen_backlog = 1024;      // connections the kernel queues before accept (at least http_threads)
  std::string allowed_origins;    // CORS: "*" or comma-separated origins; empty = no CORS
  EngineLoopOptions loop;
  // Multimodal models: their vision encoder (LoadedModel::vision); image parts need it.
  std::shared_ptr<const vision::VisionEncoder> vision;
  // --vision-encoder: a vision-encoder pool that encodes the images instead (takes precedence).
  std::shared_ptr<vision::ImageEncoder> image_encoder;
  vision::ImageServiceOptions images;
};

// What a role of a disaggregated deployment adds to the server (pd_roles.h): its internal
// routes (each declared through `declare(method, path)` for 405s and CORS), /metrics lines, and
// a readiness check behind /health (false: 503 with the reason).
struct RoleHooks {
  std::function<void(httplib::Server&, const std::function<void(const std::string&, const std::string&)>& declare)>
      install_routes;
  std::function<std::string()> extra_metrics;
  std::function<bool(std::string& why)> ready;
};

// Serves until SIGINT or SIGTERM (then refuses new requests, ends running ones, gives the
// responses being written up to a second, closes every connection and returns).
// `on_listening(port)` runs once the socket is bound.
Status run_http_server(std::unique_ptr<engine::Engine> engine, const ServeOptions& options,
                       const std::function<void(int port)>& on_listening);
// The same over any backend (the entrypoint's disaggregated one), with a role's hooks.
Status run_http_server(std::unique_ptr<RequestBackend> backend, const ServeOptions& options,
                       const std::function<void(int port)>& on_listening, const RoleHooks& hooks);

}  // namespace deepinfer::serve
