// `deepinfer serve`: the OpenAI- and Anthropic-compatible HTTP server (serve/http_server.h).
#include <string>
#include <vector>

#include "deepinfer/serve/http_server.h"
#include "deepinfer/serve/pd_engine_roles.h"
#include "deepinfer/serve/pd_entrypoint.h"
#include "deepinfer/serve/remote_image_encoder.h"
#include "deepinfer/serve/vision_role.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/serve_ep.h"
#include "deepinfer/tools/subcommands.h"

namespace deepinfer::tools {
namespace {

struct ServeFlags {
  EngineFlags engine;
  serve::ServeOptions server;
  std::string role = "all";
  ServeEpFlags ep;
  std::vector<std::string> prefill_urls, decode_urls;  // --role entrypoint
  std::string kv_transfer = "by-layer";                 // --role prefill
  std::vector<std::string> vision_encoder_urls;         // --role all: a vision-encoder pool
};

// --role entrypoint: the public APIs over remote prefill and decode engines; no weights.
int run_entrypoint(ServeFlags& f) {
  auto recipe = engine::load_tokenizer_and_config(f.engine.model);
  if (!recipe.is_ok()) return report_error(recipe.status());
  if (f.server.served_model_name.empty()) f.server.served_model_name = recipe->name;
  serve::EntrypointOptions eo;
  eo.prefill_urls = f.prefill_urls;
  eo.decode_urls = f.decode_urls;
  eo.kv_store_dirs = f.engine.kv_store;  // the engines' shared store: the entrypoint's lookups
  if (!f.vision_encoder_urls.empty()) {  // images: embeddings from the pool, carried to the engines
    auto remote = serve::RemoteImageEncoder::create(f.vision_encoder_urls);
    if (!remote.is_ok()) return report_error(remote.status());
    if ((*remote)->info().embedding_size != recipe->config.hidden_size)
      return report_error(invalid_argument("serve --vision-encoder: the encoder makes {}-float rows, the model's hidden "
                                           "size is {}", (*remote)->info().embedding_size, recipe->config.hidden_size));
    f.server.image_encoder = std::move(remote).value();
  }
  eo.max_queued_requests = f.server.loop.max_queued_requests;
  auto backend = serve::DisaggregatedBackend::create(std::move(recipe).value(), eo);
  if (!backend.is_ok()) return report_error(backend.status());
  serve::DisaggregatedBackend* b = backend->get();
  serve::RoleHooks hooks;
  hooks.ready = [b](std::string& why) { return b->ready(why); };
  hooks.extra_metrics = [b] { return b->extra_metrics(); };
  Status st = serve::run_http_server(std::move(backend).value(), f.server, nullptr, hooks);
  if (!st.is_ok()) return report_error(st);
  return kExitOk;
}

// --role vision: a vision-encoder pool member (serve/vision_role.h); no language model.
int run_vision(ServeFlags& f) {
  if (!f.prefill_urls.empty() || !f.decode_urls.empty() || !f.vision_encoder_urls.empty() || f.ep.ep.ep != 1)
    return report_error(invalid_argument("serve --role vision takes --model, --host, --port and --threads only"));
  serve::VisionRoleOptions o;
  o.model = f.engine.model;
  o.host = f.server.host;
  o.port = f.server.port;
  o.threads = f.engine.threads;
  o.limits = f.server.images.limits;
  Status st = serve::run_vision_role(o);
  if (!st.is_ok()) return report_error(st);
  return kExitOk;
}

// --role prefill | decode: an engine with the internal API of a disaggregated deployment.
int run_engine_role(ServeFlags& f, LoadedModel& loaded) {
  f.engine.kv_store_ram_only = true;  // blocks move through the KV store's RAM tier
  if (f.engine.kv_store_ram_gb <= 0) f.engine.kv_store_ram_gb = 1.0;
  auto eng = make_engine(loaded, f.engine);
  if (!eng.is_ok()) return report_error(eng.status());
  std::unique_ptr<engine::Engine> engine = std::move(eng).value();
  serve::RoleHooks hooks;
  std::unique_ptr<serve::PrefillRole> prefill;
  std::unique_ptr<serve::DecodeRole> decode;
  if (f.role == "prefill") {
    auto r = serve::PrefillRole::create(*engine, f.kv_transfer == "by-layer");
    if (!r.is_ok()) return report_error(r.status());
    prefill = std::move(r).value();
  } else {
    auto r = serve::DecodeRole::create(*engine);
    if (!r.is_ok()) return report_error(r.status());
    decode = std::move(r).value();
  }
  auto loop = std::make_unique<serve::EngineLoop>(std::move(engine), f.server.loop);
  if (prefill) {
    prefill->attach(loop.get(), f.server.served_model_name);
    hooks = prefill->hooks();
  } else {
    decode->attach(loop.get(), f.server.served_model_name);
    hooks = decode->hooks();
  }
  Status st = serve::run_http_server(std::move(loop), f.server, nullptr, hooks);
  if (!st.is_ok()) return report_error(st);
  return kExitOk;
}

int run_serve(ServeFlags& f) {
  if (f.role == "vision") return run_vision(f);
  if (f.role != "all" && f.role != "entrypoint" && !f.vision_encoder_urls.empty())
    return report_error(invalid_argument("serve: --vision-encoder is for --role all or entrypoint (the engines of a "
                                         "disaggregated deployment get the images' embeddings from the entrypoint)"));
  const bool pd = f.role == "entrypoint" || f.role == "prefill" || f.role == "decode";
  if (f.role != "entrypoint" && (!f.prefill_urls.empty() || !f.decode_urls.empty()))
    return report_error(invalid_argument("serve: --prefill and --decode are for --role entrypoint"));
  if (f.role != "prefill" && f.kv_transfer != "by-layer")
    return report_error(invalid_argument("serve: --kv-transfer is for --role prefill"));
  if (f.role == "entrypoint" && (f.prefill_urls.empty() || f.decode_urls.empty()))
    return report_error(invalid_argument(
        "serve --role entrypoint needs --prefill URL[,URL...] and --decode URL[,URL...] (the engines' "
        "http://host:port, started with serve --role prefill / --role decode)"));
  if (pd && f.ep.ep.ep != 1)
    return report_error(unsupported("serve: --ep with --role {} is not built yet", f.role));
  if (f.role == "entrypoint") return run_entrypoint(f);
  if (f.ep.ep.ep != 1) return run_serve_ep(f.engine, f.server, f.ep);
  if (f.ep.ep.eplb_interval > 0)
    return report_error(invalid_argument("serve: --eplb-interval needs --ep N (N > 1)"));
  auto loaded = load_model_for_cli(f.engine.model);
  if (!loaded.is_ok()) return report_error(loaded.status());
  if (f.server.served_model_name.empty()) f.server.served_model_name = loaded->name;
  if (pd) return run_engine_role(f, *loaded);
  f.server.vision = loaded->vision;
  if (!f.vision_encoder_urls.empty()) {
    if (!loaded->vision)
      return report_error(invalid_argument("serve --vision-encoder: {} is a text-only model", loaded->path));
    auto remote = serve::RemoteImageEncoder::create(f.vision_encoder_urls);
    if (!remote.is_ok()) return report_error(remote.status());
    const vision::ImageEncoderInfo& ri = (*remote)->info();
    if (ri.image_token_id != loaded->vision->image_token_id() || ri.tokens_per_image != loaded->vision->tokens_per_image() ||
        ri.embedding_size != loaded->vision->embedding_size())
      return report_error(invalid_argument(
          "serve --vision-encoder: the encoder's images ({} tokens of {} floats, placeholder {}) do not fit {} ({} of {}, "
          "placeholder {})", ri.tokens_per_image, ri.embedding_size, ri.image_token_id, loaded->path,
          loaded->vision->tokens_per_image(), loaded->vision->embedding_size(), loaded->vision->image_token_id()));
    f.server.image_encoder = std::move(remote).value();
  }
  auto eng = make_engine(*loaded, f.engine);
  if (!eng.is_ok()) return report_error(eng.status());
  Status st = serve::run_http_server(std::move(eng).value(), f.server, nullptr);
  if (!st.is_ok()) return report_error(st);
  return kExitOk;
}

}  // namespace

Subcommand make_serve_command() {
  auto f = std::make_shared<ServeFlags>();
  Subcommand s;
  s.add = [f](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand(
        "serve", "OpenAI- and Anthropic-compatible HTTP server (chat/completions, completions, responses, messages)");
    add_engine_flags(*cmd, f->engine);
    cmd->add_option("--host", f->server.host, "Address to listen on (default 127.0.0.1)");
    cmd->add_option("--port", f->server.port, "Port (default 8000; 0 = any free port)")->check(CLI::Range(0, 65535));
    cmd->add_option("--api-key", f->server.api_key,
                    "Require this key on every /v1 request (Authorization: Bearer KEY or x-api-key: KEY)");
    cmd->add_option("--served-model-name", f->server.served_model_name,
                    "The model name clients send and see (default: the model's short name)");
    cmd->add_option("--max-queued-requests", f->server.loop.max_queued_requests,
                    "Requests in flight beyond which new ones get 503 (default 1024)")
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--max-body-bytes", f->server.max_body_bytes, "Largest request body accepted (default 16 MiB)");
    cmd->add_option("--http-threads", f->server.http_threads,
                    "Connections served at once (each open stream holds one; default 512)")
        ->check(CLI::Range(4, 65536));
    cmd->add_option("--listen-backlog", f->server.listen_backlog,
                    "Connections the kernel queues before they are accepted (default 1024, at least --http-threads)")
        ->check(CLI::Range(16, 65535));
    cmd->add_option("--allowed-origins", f->server.allowed_origins,
                    "CORS: browser origins allowed to call the API, comma-separated, or '*' (default: none)");
    cmd->add_option("--role", f->role,
                    "all (default: one process serves everything); prefill or decode: an engine of a "
                    "disaggregated deployment (internal API, docs/pd.md); entrypoint: the public APIs over "
                    "those engines (--prefill, --decode; loads no weights); vision: a vision-encoder pool member "
                    "(a LLaVA-layout model's tower only) for --vision-encoder")
        ->check(CLI::IsMember({"all", "entrypoint", "prefill", "decode", "vision"}));
    cmd->add_option("--prefill", f->prefill_urls,
                    "--role entrypoint: prefill engines, http://host:port (comma-separated or repeated; a "
                    "host with several addresses, such as a headless Service, is one engine per address)")
        ->delimiter(',');
    cmd->add_option("--decode", f->decode_urls,
                    "--role entrypoint: decode engines, http://host:port (comma-separated or repeated)")
        ->delimiter(',');
    cmd->add_option("--vision-encoder", f->vision_encoder_urls,
                    "Multimodal models: encode images in a vision-encoder pool (serve --role vision), "
                    "http://host:port, comma-separated or repeated, instead of in this process")
        ->delimiter(',');
    cmd->add_option("--kv-transfer", f->kv_transfer,
                    "--role prefill: by-layer (default: each layer's KV leaves as soon as the forward computed "
                    "it) or by-block (whole blocks once the prompt is computed)")
        ->check(CLI::IsMember({"by-layer", "by-block"}));
    add_serve_ep_flags(*cmd, f->ep);  // --ep N: docs/parallel.md
    return cmd;
  };
  s.run = [f] { return run_serve(*f); };
  return s;
}

}  // namespace deepinfer::tools
