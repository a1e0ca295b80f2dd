// Shared pieces of the CLI subcommands: loading a model with its tokenizer, the sampling
// flags, and the exit-status convention (0 done, 1 runtime error, 2 usage error).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/loaded_model.h"
#include "deepinfer/engine/request.h"
#include "deepinfer/engine/sampling_fields.h"
#include "deepinfer/model/model.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::tools {

constexpr int kExitOk = 0;
constexpr int kExitRuntimeError = 1;
constexpr int kExitUsage = 2;

// Prints "deepinfer: <message>" on stderr and returns the exit status for the Status.
int report_error(const Status& status);

using LoadedModel = engine::LoadedModel;
// --model as a .gguf file, a Hugging Face directory or a catalogue name ("" = default model).
inline Result<LoadedModel> load_model_for_cli(const std::string& model_arg) {
  return engine::load_model_with_tokenizer(model_arg);
}

// The sampling flags of a generating subcommand: one per CLI field of
// engine/sampling_fields.h, plus --stop. They write into `request`, which starts from the
// subcommand's defaults (engine::Defaults::kGenerate or kChat; docs/sampling.md).
struct SamplingFlags {
  engine::GenerationRequest request;
  std::vector<std::string> stop;
};
void add_sampling_flags(CLI::App& app, SamplingFlags& flags, engine::Defaults defaults);
engine::GenerationRequest make_request(const SamplingFlags& flags);

struct EngineFlags {
  std::string model;
  int threads = 0;
  int max_num_seqs = 64;
  double kv_cache_gb = 1.0;  // KV cache pool (EngineConfig::kv_cache_bytes)
  bool batch_invariant = false;
  bool enable_prefix_caching = true;  // no flag: bench turns it off
  std::string device = "auto";  // --device: auto | cpu | cuda (kernels::resolve_device)
  std::string matmul_precision = "high";
  std::string kv_cache_dtype = "auto";  // EngineConfig::kv_cache_dtype
  std::string overlap = "off";  // overlap scheduling: on | off
  std::vector<std::string> kv_store;
  double kv_store_ram_gb = 0;         // 0 = the store's default (256 MiB)
  double kv_store_capacity_gb = 0;    // per target; 0 = unlimited
  std::string traffic_class = "chat";  // default for requests that do not name one
  std::string kv_store_ttl;            // "agent=3d,chat=7d"; empty = the store's defaults
  std::string swa_restore = "bounded";  // default for requests that do not name one
  std::string speculative;             // drafter: ngram | draft | mtp; empty = off
  int num_draft_tokens = 4;            // k
  std::string spec_policy = "dspark";  // fixed | dspark
  std::string draft_model;             // --speculative draft: file, directory or catalogue name
  double draft_kv_cache_gb = 0;        // the draft model's KV pool; 0 = as many tokens as the target's
  std::string spec_trace;              // no flag: bench --mode spec --spec-trace sets it per measurement
  bool kv_store_ram_only = false;      // no flag: serve's prefill and decode roles set it
};
void add_engine_flags(CLI::App& app, EngineFlags& flags);
Result<std::unique_ptr<engine::Engine>> make_engine(LoadedModel& loaded, const EngineFlags& flags);

// A TCP port free on 127.0.0.1 right now (bound, read back and closed): for processes this
// one starts. -1 when none could be bound.
int free_loopback_port();

// Token ids for a user prompt: through the chat template when `chat`, else plain text (with
// BOS when the tokenizer asks for it). User text never produces control tokens.
// `architecture` (the model's registry name) picks the chat encoding when `chat` is set.
Result<std::vector<int32_t>> encode_prompt(const recipe::Tokenizer& tok, std::string_view architecture,
                                           const std::string& text, bool chat);

}  // namespace deepinfer::tools
