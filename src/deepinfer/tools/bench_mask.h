// JSONSchemaBench runner behind `deepinfer bench --mode mask`: compiles each schema, walks
// each test instance token by token (computing the mask before every token), and reports
// soundness counts per subset plus compile-time and per-token mask-time percentiles.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/structured/json_schema/compiler.h"
#include "deepinfer/structured/masks/token_vocabulary.h"

namespace deepinfer::tools {

// When a grammar's contexts are classified.
enum class MaskBenchPrecompute {
  // As the engine does (GrammarCompiler): the grammar is ready once built and its contexts
  // are classified on a background thread while the instances are walked; compile time =
  // time to ready.
  kBackground,
  // Everything classified first: compile time includes the whole precompute; no mask waits.
  kFirst,
  // No precompute at all: every context is classified by the first mask that needs it, so
  // the masks measure the path of a mask that overtakes the precompute, with work that does
  // not depend on thread timing.
  kNone,
};

struct MaskBenchOptions {
  std::string dir;  // JSONSchemaBench directory (one JSON file per schema)
  int limit = 0;    // schemas to run after sampling; 0 = all
  int stride = 1;   // take every stride-th file in name order (deterministic sample)
  bool walk_invalid = true;
  // Also walk each valid instance with bytes that are not UTF-8 put into its first key and
  // its first string value (ill_formed_variants); every such walk must be rejected.
  bool walk_ill_formed = true;
  bool compile_only = false;  // count compiled/refused (and refusal reasons) without walking
  structured::JsonSchemaOptions schema_opts;
  structured::GrammarLimits limits;  // compile limits, including the context precompute budget
  MaskBenchPrecompute precompute = MaskBenchPrecompute::kBackground;
  // Milliseconds slept before each mask of a valid instance, standing in for the decode
  // step's forward pass (0 = masks back to back, the worst case for a background precompute).
  double step_ms = 0;
  // Milliseconds slept once after a grammar is ready and before its first mask, standing in
  // for the request's prefill (the background precompute runs meanwhile; 0 = none, the worst
  // case for it).
  double prefill_ms = 0;
  // Tokenizer for instance text; default: greedy longest match over the vocabulary.
  std::function<std::vector<int32_t>(const std::string&)> encode;
};

struct MaskBenchCounts {
  int schemas = 0, compiled = 0, refused = 0;
  int valid_tests = 0, invalid_tests = 0;
  int wrongly_rejected = 0, wrongly_accepted = 0;
  int mask_mismatches = 0;  // a token the mask disallowed but the matcher accepted, or vice versa
  int ill_formed_tests = 0;  // texts with bytes that are not UTF-8 walked (all invalid)
  void add(const MaskBenchCounts& o);
};

// A valid instance's text with ill-formed UTF-8 (0xFF, an overlong form, a surrogate, a
// truncated sequence) inserted at the start of its first key and of its first string value.
struct IllFormedText {
  std::string text;
  std::string what;  // e.g. "key bytes ff"
};
std::vector<IllFormedText> ill_formed_variants(const std::string& text);

struct Percentiles {
  double p50 = 0, p99 = 0, mean = 0;
  size_t n = 0;
};

struct MaskBenchResult {
  std::map<std::string, MaskBenchCounts> subsets;
  MaskBenchCounts total;
  Percentiles compile_ms, mask_us;
  Percentiles precompute_ms;  // background (or up-front) classification time per grammar
  Percentiles lazy_mask_us;   // the masks (of mask_us) that classified a context first
  std::vector<std::string> wrongly_accepted;  // "file#test" for each unsound result
  std::vector<std::pair<double, std::string>> slowest_precompute;  // (ms, file), top 5
  size_t contexts_precomputed = 0, contexts_lazy = 0;              // summed over compiled grammars
  size_t trie_nodes_visited =
      0;  // by all classifications: the precompute's work, machine-independent
  int precompute_incomplete = 0;               // grammars that hit the budget
  MaskBenchPrecompute precompute = MaskBenchPrecompute::kBackground;  // the options' mode
  std::map<std::string, int> refusal_reasons;  // refusal message, JSON pointers elided -> count
  std::map<std::string, std::string> refusal_examples;  // refusal message -> its first file
  std::string report() const;                  // human-readable table
};

Percentiles percentiles(std::vector<double> v);

Result<MaskBenchResult> run_mask_benchmark(std::shared_ptr<const structured::TokenVocabulary> vocab,
                                           const MaskBenchOptions& opts);

}  // namespace deepinfer::tools
