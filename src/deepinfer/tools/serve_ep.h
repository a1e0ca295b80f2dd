// `serve --ep N`: the HTTP server over N expert-parallel ranks (docs/parallel.md). Started
// directly it re-runs itself under `mpirun -n N` (with --enable-recovery, so that a lost rank
// does not take rank 0's HTTP front down with it); under `mpirun -n N` rank 0 serves HTTP and
// every rank runs an engine over its own share of the requests.
#pragma once

#include <CLI/CLI.hpp>

#include "deepinfer/serve/http_server.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/generate_ep.h"

namespace deepinfer::tools {

struct ServeEpFlags {
  EpFlags ep;
  // After a rank is lost, rank 0 answers 503 (and /health 503) this long, then exits with
  // status 1 so that a supervisor restarts the job.
  double failure_grace_s = 10;
};
void add_serve_ep_flags(CLI::App& app, ServeEpFlags& f);

int run_serve_ep(EngineFlags& engine, serve::ServeOptions& server, const ServeEpFlags& f);

}  // namespace deepinfer::tools
