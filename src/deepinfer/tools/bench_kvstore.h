// `deepinfer bench --mode kvstore`: time to first token of long prompts, cold vs a hit in each
// KV tier (the engine's own RAM blocks, the store's RAM tier, the store's SSD targets).
#pragma once

#include <string>
#include <vector>

#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {

struct KvStoreBenchOptions {
  EngineFlags engine;             // --kv-store directories are required
  std::vector<int> prompt_lens;   // e.g. 2000, 8000
  int repeat = 1;
};

// Prints one JSON line per (prompt length, tier, repetition); returns the exit status.
int run_kvstore_ttft_bench(const KvStoreBenchOptions& opts);

}  // namespace deepinfer::tools
