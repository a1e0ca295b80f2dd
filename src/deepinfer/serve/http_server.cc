#include "deepinfer/serve/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <httplib.h>

#include "deepinfer/base/log.h"
#include "deepinfer/serve/client_socket.h"
#include "deepinfer/serve/http_policy.h"
#include "deepinfer/serve/response_store.h"
#include "deepinfer/serve/routes.h"

namespace deepinfer::serve {
namespace {

using nlohmann::json;

enum class ErrorStyle { kOpenAI, kAnthropic };

void write_error(httplib::Response& res, const ApiError& e, ErrorStyle style) {
  res.status = e.http_status;
  res.set_content(style == ErrorStyle::kAnthropic ? anthropic_error_body(e) : openai_error_body(e),
                  "application/json");
}

using RouteFn = std::function<void(const httplib::Request&, httplib::Response&)>;

// The 401 of a /v1 request whose key is missing or wrong (when the server has a key).
// Checked once the body is read, in the route or the error handler, never before routing: a
// pre-routing refusal leaves the body unread on a keep-alive connection, where cpp-httplib
// takes it for the next request line, holds the connection's thread reading it for the whole
// read timeout (60 s, which a stop waited for), and answers the client's next request on that
// connection with a 400.
std::optional<ApiError> key_refusal(const httplib::Request& req, const std::string& api_key) {
  if (api_key.empty() || req.path.rfind("/v1/", 0) != 0) return std::nullopt;
  const std::string given = request_api_key(req);
  if (constant_time_equal(given, api_key)) return std::nullopt;
  const bool anthropic = req.path.rfind("/v1/messages", 0) == 0;
  return ApiError(401, "", given.empty() ? "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'"
                                         : "invalid API key",
                  anthropic ? "authentication_error" : "invalid_request_error");
}

// What every API route shares.
struct RouteEnv {
  ServerMetrics& metrics;
  std::atomic<int>& in_progress;  // ServerContext::in_progress
  std::string api_key;
};

// Runs a handler, after the key check, with the family's error shape and counts the result;
// the handler is a response in progress while it runs.
httplib::Server::Handler route(const RouteEnv& env, std::string name, ErrorStyle style, RouteFn fn) {
  return [&env, name = std::move(name), style, fn = std::move(fn)](const httplib::Request& req,
                                                                     httplib::Response& res) {
    const InProgress busy(&env.in_progress);
    try {
      if (std::optional<ApiError> refusal = key_refusal(req, env.api_key)) throw *refusal;
      fn(req, res);
    } catch (const ApiError& e) {
      write_error(res, e, style);
    } catch (const std::exception& e) {
      log::error("{}: unexpected error: {}", name, e.what());
      write_error(res, ApiError(500, "", std::string("internal error: ") + e.what(), "server_error"), style);
    }
    env.metrics.count_request(name, res.status == -1 ? 200 : res.status);  // -1: httplib's "200 later"
  };
}

// How long a stop lets the responses in progress end (streams write their final events)
// before it shuts down the connections still open.
constexpr std::chrono::seconds kStopGrace{1};

// A stop, once running requests were ended and the listener closed: waits (at most
// kStopGrace) for the responses in progress, then shuts down every connection still open
// (idle keep-alive ones, clients that stopped reading a stream, requests half sent), so that
// no handler thread waits out its socket's keep-alive, read or write timeout (up to a minute)
// while the server joins them.
void close_connections(const std::atomic<int>& in_progress, int port) {
  const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  while (in_progress.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const int unfinished = in_progress.load();
  const int closed = shutdown_connections(port);
  if (unfinished > 0)
    log::warn("serve: {} responses still unfinished {} s after the stop; their connections were closed",
              unfinished, kStopGrace.count());
  log::info("serve: closed {} open connections", closed);
}

std::atomic<bool> g_stop_requested{false};

// SIGINT/SIGTERM write one byte to this pipe (the only async-signal-safe way to hand them
// over); a watcher thread reads it and stops the server from ordinary code.
int g_signal_pipe[2] = {-1, -1};
int g_signal_number = 0;

void on_shutdown_signal(int sig) {
  g_signal_number = sig;
  const char byte = 1;
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
}

}  // namespace

Status run_http_server(std::unique_ptr<engine::Engine> engine, const ServeOptions& options,
                       const std::function<void(int port)>& on_listening) {
  return run_http_server(std::make_unique<EngineLoop>(std::move(engine), options.loop), options,
                         on_listening, RoleHooks{});
}

Status run_http_server(std::unique_ptr<RequestBackend> backend, const ServeOptions& options,
                       const std::function<void(int port)>& on_listening, const RoleHooks& hooks) {
  if (g_signal_pipe[0] < 0 && pipe(g_signal_pipe) != 0) return io_error("serve: cannot create a pipe");
  struct sigaction action = {};
  action.sa_handler = on_shutdown_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  const int64_t max_len = backend->model_config().max_position;
  RequestBackend& loop = *backend;
  ResponseStore responses(size_t(std::max(1, options.max_responses_stored)));
  ServerContext ctx;
  ctx.loop = &loop;
  ctx.model_name = options.served_model_name;
  ctx.max_model_len = max_len;
  ctx.created_unix = unix_now();
  ctx.responses = &responses;
  std::atomic<int> in_progress{0};
  ctx.in_progress = &in_progress;
  ThreadPool vision_pool(options.vision ? 0 : 1);
  std::unique_ptr<vision::ImageService> images;
  if (options.image_encoder) images = std::make_unique<vision::ImageService>(options.image_encoder, options.images);
  else if (options.vision) images = std::make_unique<vision::ImageService>(options.vision, &vision_pool, options.images);
  ctx.images = images.get();

  httplib::Server server;
  const int threads = std::max(4, options.http_threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  server.set_payload_max_length(options.max_body_bytes);
  server.set_read_timeout(options.read_timeout_seconds, 0);
  server.set_write_timeout(options.read_timeout_seconds, 0);
  server.set_keep_alive_max_count(1000);
  server.set_keep_alive_timeout(5);  // also bounds how long a stop waits for idle connections
  // cpp-httplib listens with a backlog of 5 (compiled into Debian's library), so a burst of
  // connections overflows the accept queue; keep the socket to listen again with a deeper one.
  int listen_fd = -1;
  server.set_socket_options([&listen_fd](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd = sock;
  });

  ServerMetrics& metrics = loop.metrics();
  const RouteEnv env{metrics, in_progress, options.api_key};
  RouteTable table;
  const CorsPolicy cors(options.allowed_origins);
  server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    cors.apply(req, res);
    if (req.method == "OPTIONS") {  // preflights carry no key
      const std::string allow = table.allowed_methods(req.path);
      if (allow.empty()) return httplib::Server::HandlerResponse::Unhandled;  // a 404
      if (cors.enabled() || req.has_header("Origin")) {
        cors.preflight(req, allow, res);
      } else {
        res.status = 204;
        res.set_header("Allow", allow);
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;  // the key is checked once the body is read
  });

  auto post = [&](const std::string& path, ErrorStyle style, RouteFn fn) {
    table.add("POST", path);
    server.Post(path, route(env, path, style, std::move(fn)));
  };
  auto get = [&](const std::string& pattern, const std::string& name, ErrorStyle style, RouteFn fn) {
    table.add("GET", pattern);
    server.Get(pattern, route(env, name, style, std::move(fn)));
  };
  post("/v1/chat/completions", ErrorStyle::kOpenAI, [&](auto& req, auto& res) { handle_chat_completions(ctx, req, res); });
  post("/v1/completions", ErrorStyle::kOpenAI, [&](auto& req, auto& res) { handle_completions(ctx, req, res); });
  post("/v1/responses", ErrorStyle::kOpenAI, [&](auto& req, auto& res) { handle_responses(ctx, req, res); });
  get(R"(/v1/responses/([A-Za-z0-9_\-]+))", "/v1/responses/{id}", ErrorStyle::kOpenAI,
      [&](auto& req, auto& res) { handle_get_response(ctx, req.matches[1], res); });
  post("/v1/messages", ErrorStyle::kAnthropic, [&](auto& req, auto& res) { handle_messages(ctx, req, res); });
  post("/v1/messages/count_tokens", ErrorStyle::kAnthropic,
       [&](auto& req, auto& res) { handle_count_tokens(ctx, req, res); });
  // One object serves both SDKs' model shapes (OpenAI: id/object/owned_by; Anthropic:
  // id/type/display_name/created_at).
  const json model = {{"id", ctx.model_name}, {"object", "model"}, {"created", ctx.created_unix},
                      {"owned_by", "deepinfer"}, {"max_model_len", ctx.max_model_len},
                      {"type", "model"}, {"display_name", ctx.model_name}, {"created_at", "1970-01-01T00:00:00Z"}};
  get("/v1/models", "/v1/models", ErrorStyle::kOpenAI, [&](auto&, auto& res) {
    res.set_content(dump_json({{"object", "list"}, {"data", json::array({model})}, {"has_more", false},
                               {"first_id", ctx.model_name}, {"last_id", ctx.model_name}}),
                    "application/json");
  });
  get("/v1/models/(.+)", "/v1/models/{id}", ErrorStyle::kOpenAI, [&](auto& req, auto& res) {
    const std::string id = req.matches[1];
    if (id != ctx.model_name)
      throw ApiError(404, "model", fmt::format("the model '{}' does not exist; this server serves '{}'", id,
                                               ctx.model_name),
                     "not_found_error");
    res.set_content(dump_json(model), "application/json");
  });
  table.add("GET", "/health");
  server.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    std::string why;
    if (hooks.ready && !hooks.ready(why)) {
      res.status = 503;
      res.set_content(dump_json({{"status", "unavailable"}, {"reason", why}}), "application/json");
      return;
    }
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  if (hooks.install_routes) hooks.install_routes(server, [&](const std::string& method, const std::string& path) {
    table.add(method, path);
  });
  table.add("GET", "/metrics");
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    std::string text = metrics.render(loop.gauges(), ctx.model_name);
    if (hooks.extra_metrics) text += hooks.extra_metrics();
    if (ctx.images != nullptr) {
      const vision::ImageServiceStats st = ctx.images->stats();
      text += fmt::format(
          "# HELP deepinfer_images_encoded_total Images run through the vision encoder.\n"
          "# TYPE deepinfer_images_encoded_total counter\ndeepinfer_images_encoded_total {}\n"
          "# HELP deepinfer_image_cache_hits_total Images whose embeddings came from the cache.\n"
          "# TYPE deepinfer_image_cache_hits_total counter\ndeepinfer_image_cache_hits_total {}\n"
          "# HELP deepinfer_image_encode_seconds_total Decode + preprocess + encode time of those images.\n"
          "# TYPE deepinfer_image_encode_seconds_total counter\ndeepinfer_image_encode_seconds_total {:.6f}\n",
          st.encoded, st.cache_hits, st.encode_seconds);
    }
    res.set_content(text, "text/plain; version=0.0.4");
  });
  table.add("GET", "/");
  server.Get("/", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(chat_page_html(), "text/html; charset=utf-8");
  });
  server.set_error_handler([&](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const bool anthropic = req.path.rfind("/v1/messages", 0) == 0;
    // No route (or a body too large): the key still comes first.
    if (std::optional<ApiError> refusal = key_refusal(req, env.api_key)) {
      write_error(res, *refusal, anthropic ? ErrorStyle::kAnthropic : ErrorStyle::kOpenAI);
      metrics.count_request("other", 401);
      return;
    }
    std::string allow;
    if (res.status == 404) allow = table.allowed_methods(req.path);
    if (!allow.empty()) {  // the path exists, the method does not
      res.status = 405;
      res.set_header("Allow", allow);
    }
    std::string message = res.status == 404   ? "no route for " + req.method + " " + req.path
                          : res.status == 405 ? fmt::format("{} is not allowed on {} (allowed: {})", req.method,
                                                            req.path, allow)
                          : res.status == 413 ? fmt::format("the request body is larger than {} bytes",
                                                            options.max_body_bytes)
                                              : fmt::format("HTTP {}", res.status);
    ApiError e(res.status, "", message, res.status == 404 ? "not_found_error" : "invalid_request_error");
    write_error(res, e, anthropic ? ErrorStyle::kAnthropic : ErrorStyle::kOpenAI);
    metrics.count_request("other", res.status);
  });

  int port = options.port;
  if (port == 0) {
    port = server.bind_to_any_port(options.host);
    if (port < 0) return io_error("serve: cannot bind {}: no free port", options.host);
  } else if (!server.bind_to_port(options.host, port)) {
    return io_error("serve: cannot listen on {}:{} (in use, or not an address of this machine)", options.host, port);
  }
  // Linux takes a second listen() on a listening socket as a new backlog (capped by
  // net.core.somaxconn).
  const int backlog = std::max(options.listen_backlog, threads);
  if (listen_fd < 0 || ::listen(listen_fd, backlog) != 0)
    log::warn("serve: cannot deepen the listen backlog to {}; bursts of connections may be refused", backlog);

  g_stop_requested = false;
  std::thread watcher([&] {
    char byte = 0;
    while (read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    if (g_stop_requested) return;
    fmt::print(stderr, "deepinfer serve: signal {} received; ending running requests and stopping\n", g_signal_number);
    loop.shutdown();  // running requests end (clients get what was generated, then the end)
    server.stop();    // closes the listener only
    close_connections(in_progress, port);
  });
  if (on_listening) on_listening(port);
  fmt::print(stderr, "deepinfer serve: listening on http://{}:{} (model '{}')\n", options.host, port, ctx.model_name);
  const bool ok = server.listen_after_bind();
  // Wake the watcher if the server stopped for another reason.
  g_stop_requested = true;
  const char byte = 0;
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
  watcher.join();
  loop.shutdown();
  if (!ok) return io_error("serve: the HTTP server stopped with an error");
  return Status();
}

}  // namespace deepinfer::serve
