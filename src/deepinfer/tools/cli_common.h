// Shared pieces of the CLI subcommands: loading a model with its tokenizer, the sampling
// flags, and the exit-status convention (0 done, 1 runtime error, 2 usage error).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/request.h"
#include "deepinfer/model/model.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::tools {

constexpr int kExitOk = 0;
constexpr int kExitRuntimeError = 1;
constexpr int kExitUsage = 2;

// Prints "deepinfer: <message>" on stderr and returns the exit status for the Status.
int report_error(const Status& status);

struct LoadedModel {
  std::string name;  // short name or file name, for output records
  std::string path;  // the weights (file or directory); their content digest keys the KV store
  std::shared_ptr<const recipe::Tokenizer> tokenizer;
  std::unique_ptr<model::Model> model;
};

// --model as a .gguf file, a Hugging Face directory or a catalogue name ("" = default model).
Result<LoadedModel> load_model_for_cli(const std::string& model_arg);

// Flags every generating subcommand takes.
struct SamplingFlags {
  int max_tokens = 256;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int64_t seed = -1;
  std::vector<std::string> stop;
  int logprobs = -1;
  bool ignore_eos = false;
};
void add_sampling_flags(CLI::App& app, SamplingFlags& flags);
engine::GenerationRequest make_request(const SamplingFlags& flags);

struct EngineFlags {
  std::string model;
  int threads = 0;
  int max_num_seqs = 64;
  bool batch_invariant = false;
  bool prefix_caching = true;
  std::string matmul_precision = "high";
  std::string overlap = "off";  // overlap scheduling: on | off
  std::vector<std::string> kv_store;
  double kv_store_ram_gb = 0;         // 0 = the store's default (256 MiB)
  double kv_store_capacity_gb = 0;    // per target; 0 = unlimited
  std::string traffic_class = "chat";  // default for requests that do not name one
  std::string kv_store_ttl;            // "agent=3d,chat=7d"; empty = the store's defaults
};
void add_engine_flags(CLI::App& app, EngineFlags& flags);
Result<std::unique_ptr<engine::Engine>> make_engine(LoadedModel& loaded, const EngineFlags& flags);

// Token ids for a user prompt: through the chat template when `chat`, else plain text (with
// BOS when the tokenizer asks for it). User text never produces control tokens.
// `architecture` (the model's registry name) picks the chat encoding when `chat` is set.
Result<std::vector<int32_t>> encode_prompt(const recipe::Tokenizer& tok, std::string_view architecture,
                                           const std::string& text, bool chat);

}  // namespace deepinfer::tools
