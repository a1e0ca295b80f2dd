// `deepinfer serve`: the OpenAI- and Anthropic-compatible HTTP server (serve/http_server.h).
#include <string>

#include "deepinfer/serve/http_server.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/subcommands.h"

namespace deepinfer::tools {
namespace {

struct ServeFlags {
  EngineFlags engine;
  serve::ServeOptions server;
  std::string role = "all";
  int ep = 1;
};

int run_serve(ServeFlags& f) {
  if (f.role != "all")
    return report_error(unsupported(
        "serve: --role {} needs prefill/decode disaggregation, which this build does not have yet; "
        "use --role all (one process serves everything)", f.role));
  if (f.ep != 1)
    return report_error(unsupported("serve: --ep {}: expert parallelism across processes is not built yet; use --ep 1", f.ep));
  auto loaded = load_model_for_cli(f.engine.model);
  if (!loaded.is_ok()) return report_error(loaded.status());
  if (f.server.served_model_name.empty()) f.server.served_model_name = loaded->name;
  f.server.vision = loaded->vision;
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
    cmd->add_option("--role", f->role, "all (default), entrypoint, prefill, decode, vision")
        ->check(CLI::IsMember({"all", "entrypoint", "prefill", "decode", "vision"}));
    cmd->add_option("--ep", f->ep, "Expert-parallel size (1 in this build)")->check(CLI::Range(1, 1024));
    return cmd;
  };
  s.run = [f] { return run_serve(*f); };
  return s;
}

}  // namespace deepinfer::tools
