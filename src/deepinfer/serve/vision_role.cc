#include "deepinfer/serve/vision_role.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "deepinfer/base/log.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/engine/loaded_model.h"
#include "deepinfer/kvstore/content_digest.h"
#include "deepinfer/model/catalog.h"
#include "deepinfer/serve/metrics.h"
#include "deepinfer/serve/pd_protocol.h"
#include "deepinfer/vision/image_encoder.h"

namespace deepinfer::serve {
namespace {

using nlohmann::json;

struct VisionCounters {
  std::atomic<uint64_t> encoded{0}, failures{0}, bytes_in{0};
  LatencyHistogram seconds;
};

std::string metrics_text(const VisionCounters& c) {
  std::string out = fmt::format(
      "# HELP deepinfer_vision_images_encoded_total Images this vision encoder turned into embeddings.\n"
      "# TYPE deepinfer_vision_images_encoded_total counter\ndeepinfer_vision_images_encoded_total {}\n"
      "# HELP deepinfer_vision_failures_total Images refused (corrupt, unsupported, too large).\n"
      "# TYPE deepinfer_vision_failures_total counter\ndeepinfer_vision_failures_total {}\n"
      "# HELP deepinfer_vision_image_bytes_total Bytes of the images received.\n"
      "# TYPE deepinfer_vision_image_bytes_total counter\ndeepinfer_vision_image_bytes_total {}\n",
      c.encoded.load(), c.failures.load(), c.bytes_in.load());
  c.seconds.render("deepinfer_vision_encode_seconds", "Decode, preprocess, tower and projector of one image.", out);
  return out;
}

void install_routes(httplib::Server& server, vision::LocalImageEncoder& encoder, const json& info,
                    VisionCounters& counters) {
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
  server.Get("/metrics", [&counters](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(counters), "text/plain; version=0.0.4");
  });
  server.Get("/internal/v1/info", [info](const httplib::Request&, httplib::Response& res) {
    res.set_content(info.dump(), "application/json");
  });
  server.Post("/internal/v1/encode", [&](const httplib::Request& req, httplib::Response& res) {
    counters.bytes_in += req.body.size();
    const auto t0 = std::chrono::steady_clock::now();
    auto emb = encoder.encode(req.body);
    if (!emb.is_ok()) {
      counters.failures += 1;
      res.status = emb.status().code() == StatusCode::kInvalidArgument || emb.status().code() == StatusCode::kUnsupported ||
                           emb.status().code() == StatusCode::kCorrupt
                       ? 400
                       : 500;
      res.set_content(json{{"error", emb.status().message()}}.dump(), "application/json");
      return;
    }
    counters.encoded += 1;
    counters.seconds.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    res.set_content(reinterpret_cast<const char*>(emb->data()), emb->size() * sizeof(float), "application/octet-stream");
  });
}

}  // namespace

Status run_vision_role(const VisionRoleOptions& options) {
  DI_ASSIGN_OR_RETURN(engine::VisionOnly loaded, engine::load_vision_encoder(options.model));
  kvstore::ContentDigestOptions digest_opts;
  digest_opts.cache_file = model::deepinfer_home() + "/kvstore/weights-digests";
  DI_ASSIGN_OR_RETURN(std::string digest, kvstore::content_digest(loaded.path, digest_opts));
  ThreadPool pool(options.threads);
  vision::LocalImageEncoder encoder(loaded.encoder, &pool, options.limits);
  const vision::ImageEncoderInfo& ei = encoder.info();
  const json info = {{"role", "vision"}, {"protocol", pd::kProtocolVersion}, {"model", loaded.name},
                     {"image_token_id", ei.image_token_id}, {"tokens_per_image", ei.tokens_per_image},
                     {"embedding_size", ei.embedding_size}, {"identity", "weights=" + digest}};
  VisionCounters counters;
  httplib::Server server;
  const int threads = std::max(2, options.http_threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  server.set_payload_max_length(size_t(options.limits.max_bytes) + 1024);
  install_routes(server, encoder, info, counters);

  // SIGINT / SIGTERM end the server: blocked here (and in every thread started after), taken
  // by sigwait on this thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  if (!server.bind_to_port(options.host, options.port))
    return io_error("serve --role vision: cannot listen on {}:{} (in use, or not an address of this machine)",
                    options.host, options.port);
  std::thread listener([&] { server.listen_after_bind(); });
  fmt::print(stderr, "deepinfer serve --role vision: listening on http://{}:{} (model '{}', {} tokens per image)\n",
             options.host, options.port, loaded.name, ei.tokens_per_image);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  fmt::print(stderr, "deepinfer serve --role vision: signal {} received; stopping\n", sig);
  server.stop();
  listener.join();
  return Status::ok();
}

}  // namespace deepinfer::serve
