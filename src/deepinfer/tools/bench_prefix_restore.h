// `deepinfer bench --mode prefix-restore`: for DeepSeek-V4-style models, what restoring a
// cached prefix costs and how far the bounded restore drifts from the exact one.
#pragma once

#include <vector>

#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {

struct PrefixRestoreBenchOptions {
  EngineFlags engine;
  std::vector<int> prompt_lens;  // cached prefix lengths, e.g. 1000, 8000, 32000
  int gen_len = 16;              // greedy tokens compared between the restores
  int repeat = 1;                // prompts per length (drift is averaged over them)
  // Also computes each prompt with one token changed just before the replayed span (exact, whole)
  // and reports its drift from the original: how much the model's output moves when context
  // the replay does not see changes (a yardstick for the bounded drift on random weights).
  bool context_baseline = false;
};

// Prints one JSON line per (prefix length, prompt) and a summary line per length; returns
// the exit status.
int run_prefix_restore_bench(const PrefixRestoreBenchOptions& opts);

}  // namespace deepinfer::tools
