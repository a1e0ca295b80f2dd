// `deepinfer bench --mode spec`: speculative decoding side by side on the n-gram drafter's
// home ground (editing a given code file, extracting fields into JSON) and with the draft-model
// drafter on chat: tokens/s at each batch size without speculation, with fixed k and with
// DSpark gating, and the drafts verified and accepted per step. One JSON object per
// measurement on stdout.
#pragma once

#include <string>
#include <vector>

#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {

struct SpecBenchOptions {
  EngineFlags engine;       // the bench runs off, fixed and dspark; --speculative, when given,
                            // is the drafter of every task (default: ngram, and draft on chat);
                            // --draft-model drafts with "draft" (default: the model itself)
  std::vector<int> batches;  // e.g. 1, 8, 32
  int gen_len = 128;         // most tokens per sequence (sequences stop at their end too)
  std::string tasks;         // comma-separated: code-edit, json-extract, chat; empty = all
  std::string plot;          // FILE.svg | FILE.png: tokens/s against batch size per configuration
  std::string configs;       // comma-separated: off, fixed, dspark; empty = all three
  std::string trace;         // prefix: each speculative measurement writes a verification trace
                             // to PREFIX.TASK.bBATCH.CONFIG.jsonl (Speculator's trace_path)
};

int run_spec_bench(const SpecBenchOptions& opts);

}  // namespace deepinfer::tools
