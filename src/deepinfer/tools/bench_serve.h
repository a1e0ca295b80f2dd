// `deepinfer bench --mode serve` and `--mode tokenize`: the HTTP server measured from the
// outside (concurrent streaming clients on loopback), and the tokenizer's encode speed.
#pragma once

#include <vector>

#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {

struct ServeBenchOptions {
  EngineFlags engine;
  std::vector<int> batches;  // concurrent clients per measurement
  int prompt_len = 128;      // prompt tokens per request (token ids, distinct per request)
  int gen_len = 128;         // completion tokens per request (ignore_eos)
  int repeat = 1;
  std::string plot;          // FILE.svg | FILE.png: per-sequence vs total throughput
  // Also measure a disaggregated deployment of this many prefill and decode engines
  // (`deepinfer cluster`, each engine on engine.threads / 2 threads, at least 1) after the
  // all-in-one server, same prompts and client counts; 0 = all-in-one only.
  int disaggregated_prefill = 0, disaggregated_decode = 0;
};

// Starts `serve` in-process on a free loopback port, then for each batch size runs that many
// clients at once, each one streaming /v1/completions; prints one JSON line per measurement
// ("deployment": "all-in-one", or "disaggregated NP+MD" for the cluster measured after it).
int run_serve_bench(const ServeBenchOptions& opts);

struct TokenizeBenchOptions {
  std::string model;
  int megabytes = 1;  // size of the mixed text encoded per measurement
  int repeat = 1;
};

// Encodes a deterministic mixed text (prose, code, numbers, non-ASCII) and prints tokens/s.
int run_tokenize_bench(const TokenizeBenchOptions& opts);

}  // namespace deepinfer::tools
