// The engine's public face: add requests, step, read outputs. One step = schedule -> the
// runner's forward -> grammar masks -> the runner's sampling -> update the scheduler ->
// detokenize and check stops; with overlap scheduling the CPU-side parts run on a worker
// thread while the forward computes. The ModelRunner (model_runner.h) holds the model, the KV
// storage and the compute threads; the engine talks to it only through runner_io.h values.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/structured/structured.h"
#include "deepinfer/engine/kv_cache_manager.h"
#include "deepinfer/engine/kv_store_tier.h"
#include "deepinfer/engine/model_runner.h"
#include "deepinfer/engine/request.h"
#include "deepinfer/engine/scheduler.h"
#include "deepinfer/engine/speculative/speculator.h"
#include "deepinfer/model/model.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::engine {

class StepWorker;  // step_worker.h

// Names, one scheme from flag to field: a field is named after the setting it feeds in the
// component that uses it (vLLM's names where vLLM has the setting: max_num_seqs,
// max_num_batched_tokens, block_size, enable_prefix_caching), and a KV store field is
// `kv_store_` + its name in KvStoreTierOptions / kvstore::KvStoreConfig (dirs, host_tier_bytes,
// target_capacity_bytes, ttl_seconds). Quantities are in bytes and seconds here; the CLI
// (tools/cli_common.h, EngineFlags: one member per flag, named as the flag) takes GiB and
// duration strings and converts once, in make_engine. Flags whose user-facing name differs:
// --threads (num_threads), --matmul-precision (int8_activations), --overlap
// (overlap_scheduling), --kv-store (kv_store_dirs), --kv-store-ram-gb (kv_store_host_tier_bytes:
// "RAM" for users, the host tier in the store), --kv-store-capacity-gb
// (kv_store_target_capacity_bytes), --traffic-class (default_traffic_class).
struct EngineConfig {
  int num_threads = 0;               // 0 = one per core
  int max_num_seqs = 64;
  int max_num_batched_tokens = 512;  // token budget per step (prefill chunk size)
  int block_size = 16;
  size_t kv_cache_bytes = size_t{1} << 30;
  bool enable_prefix_caching = true;
  bool batch_invariant = false;
  bool int8_activations = false;  // see model::ForwardContext
  // Element type of the K/V pools (--kv-cache-dtype): auto | f32 | bf16 | f16; auto = f32
  // (model::resolve_kv_cache_dtype). 16-bit halves the bytes per block, so twice the blocks fit
  // in kv_cache_bytes.
  std::string kv_cache_dtype = "auto";
  // While step N's forward runs, a worker thread finishes step N-1's outputs (scheduler update,
  // detokenize, stop strings) and schedules and builds step N+1 (SGLang/vLLM "zero-overhead"
  // scheduling with a one-step lag). Same tokens as without it; outputs arrive one step() later.
  // Ignored (off) with a KV store tier, whose loads would write blocks a forward may still use.
  // Off by default: on 2 cores the hidden CPU work is ~1-4% of a step and the worker thread
  // competes with the compute threads; no measured win yet (docs/engine.md).
  bool overlap_scheduling = false;
  // KV store targets (directories, same order in every process); empty = no store tier.
  std::vector<std::string> kv_store_dirs;
  // A KV store tier even without targets (RAM only): the prefill and decode roles of a
  // disaggregated deployment move prompt blocks through it (kv_export.h).
  bool kv_store_ram_only = false;
  // RAM tier of the KV store (between the engine's blocks and the targets); 0 = default 256 MiB.
  size_t kv_store_host_tier_bytes = 0;
  // Per-target byte limit of the KV store's SSD tier (the sweeper evicts the entries with the
  // least lifetime left beyond it, every minute); 0 = unlimited.
  uint64_t kv_store_target_capacity_bytes = 0;
  // Traffic class of requests that do not name one (decides how long the store keeps blocks).
  kvstore::TrafficClass default_traffic_class = kvstore::TrafficClass::kChat;
  // Sliding-window restore of requests that do not name one (--swa-restore).
  SwaRestore default_swa_restore = SwaRestore::kBounded;
  // KV store lifetime per traffic class (agent, chat).
  int64_t kv_store_ttl_seconds[kvstore::kNumTrafficClasses] = {3 * 86400, 7 * 86400};
  // Names the weights the KV was computed with (file identity, quantization); blocks never
  // cross namespaces. Empty = model name and architecture.
  std::string kv_store_namespace;
  // Speculative decoding (--speculative, --num-draft-tokens, --spec-policy); method "" = off.
  // Turns overlap scheduling off (a step's drafts follow the previous step's tokens).
  speculative::SpeculativeConfig speculative;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double forward_seconds = 0;
  double sample_seconds = 0;
  // Time the compute threads waited for the CPU side between consecutive forwards (sampling,
  // scheduling, batch building, outputs, the caller's own work between step() calls).
  double idle_seconds = 0;
  double idle_share() const {
    const double total = idle_seconds + forward_seconds;
    return total > 0 ? idle_seconds / total : 0;
  }
};

// The checks add_request makes of a request before queueing it (prompt ids in the vocabulary,
// lengths, sampling ranges, stop strings); the entrypoint of a disaggregated deployment makes
// them too, so a bad request is a 400 there rather than an error from a remote engine.
Status validate_generation_request(const GenerationRequest& request, const model::ModelConfig& mc);

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(std::unique_ptr<model::Model> model,
                                                std::shared_ptr<const recipe::Tokenizer> tokenizer,
                                                const EngineConfig& config);
  ~Engine();

  // Validates and queues a request; returns its id. Bad requests get kInvalidArgument.
  Result<int64_t> add_request(const GenerationRequest& request);
  // Compiles `spec` now (kept in the compile cache for the requests that use it): the reason it
  // cannot be used, or ok. Lets a caller refuse a bad schema, regex or grammar up front.
  Status check_grammar(const structured::GrammarSpec& spec);
  // Ends a request now; its blocks are freed. Unknown ids are ignored.
  void abort(int64_t request_id);
  // Runs one step and returns the outputs it produced (new tokens, finished requests). With
  // overlap scheduling, a step returns the outputs of the previous forward.
  std::vector<RequestOutput> step();
  bool has_unfinished() const;
  bool overlap_scheduling() const { return overlap_; }

  const recipe::Tokenizer& tokenizer() const { return *tokenizer_; }
  const model::ModelConfig& model_config() const { return runner_->model_config(); }
  const EngineStats& stats() const { return stats_; }
  const KvCacheStats& kv_stats() const { return kv_manager_->stats(); }
  // Flushes queued KV store writes (no-op without a store).
  void flush_kv_store();
  // The KV store tier, or null when the engine has none (stats, tests).
  const KvStoreTier* kv_store_tier() const { return kv_tier_.get(); }
  // Prefill/decode disaggregation: the tier that imports blocks from other engines (its
  // import_block is thread-safe), and the sink that requests with a kv_export_tag hand their
  // prompt blocks to (engine thread). Both need a tier (kv_store_dirs or kv_store_ram_only).
  KvStoreTier* kv_import_tier() { return kv_tier_.get(); }
  // `by_layer`: where the cache allows it, send each layer as the forward computes it
  // (KvExportSink::export_layer); false: whole blocks when the sequence is freed.
  Status set_kv_export_sink(KvExportSink* sink, bool by_layer = true);
  // Drops every cached prefix block nobody uses from the in-memory prefix cache (the KV store
  // keeps its copies). Like vLLM's reset_prefix_cache; benchmarks use it to measure the tiers.
  // Returns how many blocks were dropped.
  int reset_prefix_cache();
  // Hybrid caches (DeepSeek-V4): frees the recent rows (window, compressor tails) of every
  // cached block no request uses, keeping their paged state, as memory pressure would: a later
  // hit is then restored per swa_restore. Returns how many slabs; 0 for other models.
  int drop_cached_recent_rows() { return kv_manager_->drop_cached_recent_rows(); }
  int num_running() const { return scheduler_->num_running(); }
  int num_waiting() const { return scheduler_->num_waiting(); }
  // KV pool occupancy: blocks in all, and blocks an allocation could take now (free or
  // cached-but-unreferenced).
  // MoE models: tokens routed to each expert so far, [layer][expert]; empty for dense models.
  std::vector<std::vector<uint64_t>> expert_token_counts() const { return runner_->model().expert_token_counts(); }
  // Forward time by part since load, where the model keeps it (see model::Model); benchmarks.
  std::vector<std::pair<std::string, double>> forward_part_seconds() const {
    return runner_->model().forward_part_seconds();
  }
  int kv_num_blocks() const { return kv_manager_->num_blocks(); }
  int kv_num_available_blocks() const { return kv_manager_->num_available_blocks(); }
  // Hybrid caches (DeepSeek-V4): recent slabs in all, slabs an allocation could take now, and
  // cached blocks' recent rows evicted so far; all 0 for plain K/V caches.
  int kv_num_recent_slabs() const { return kv_manager_->recent_slabs().num_slabs(); }
  // Hybrid caches: how far back a new token reads recent rows (a bounded replay's length).
  int kv_recent_tokens() const { return kv_manager_->recent_tokens(); }
  int kv_num_available_recent_slabs() const { return kv_manager_->recent_slabs().num_available(); }
  int64_t kv_recent_slab_evictions() const { return kv_manager_->recent_slabs().evictions(); }
  int kv_block_size() const { return config_.block_size; }
  int num_threads() const { return runner_->num_threads(); }
  // Speculative decoding counters; null when the engine has no drafter.
  const speculative::SpecStats* spec_stats() const {
    return speculator_ ? &speculator_->stats() : nullptr;
  }

 private:
  struct RequestState;
  struct Prepared;  // a scheduled step with its model inputs
  struct Sampled;   // a step after sampling, before the scheduler update and detokenizing
  Engine();

  std::unique_ptr<Prepared> prepare_step();
  // Prefill/decode disaggregation: the after-layer export of the prompts this step completes.
  std::function<void(int)> layer_export_for(const ScheduleOutput& sched);
  Status run_forward(Prepared& p);
  void prepare_sampling(Prepared& p);
  Sampled sample_step(Prepared&& p);
  void process_step(Sampled&& s, std::vector<RequestOutput>& outputs);
  void fail_step(const ScheduleOutput& sched, const Status& st, std::vector<RequestOutput>& outputs);
  void answer_empty_requests(std::vector<RequestOutput>& outputs);
  std::vector<RequestOutput> step_overlapped(std::vector<RequestOutput> outputs);

  EngineConfig config_;
  std::shared_ptr<const recipe::Tokenizer> tokenizer_;
  std::unique_ptr<ModelRunner> runner_;   // declared before kv_tier_, which copies its KV blocks
  std::unique_ptr<KvStoreTier> kv_tier_;  // declared before kv_manager_, so it outlives it
  std::unique_ptr<BlockStateCopier> block_copier_;  // hybrid caches: bounded replays' copies
  std::unique_ptr<KvCacheManager> kv_manager_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<int64_t, std::unique_ptr<RequestState>> requests_;
  std::vector<int64_t> pending_empty_;  // max_tokens == 0 requests, answered on the next step
  // Requests whose grammar is still compiling: they join the scheduler when it is ready, so a
  // slow compile never holds up the batch.
  std::vector<std::pair<int64_t, Sequence>> pending_grammar_;
  std::unique_ptr<structured::GrammarCompiler> grammar_compiler_;  // created on first use
  structured::GrammarCompiler& grammar_compiler();
  void admit_compiled_grammars(std::vector<RequestOutput>& outputs);
  void propose_drafts();                            // speculative decoding, before schedule()
  void check_drafts(const RequestState& r, DraftCheck& check);  // grammar masks per draft
  // A verified row's accepted drafts (cut at an EOS, fed to the grammar); counts them.
  std::vector<SampledRow> take_accepted(int64_t seq_id, const SamplingRow& in, SampledRow& sr);
  std::unique_ptr<speculative::Speculator> speculator_;  // null = no speculative decoding
  int64_t next_id_ = 1;
  EngineStats stats_;
  bool overlap_ = false;
  std::unique_ptr<StepWorker> worker_;  // overlap only
  std::unique_ptr<Prepared> next_;      // overlap: the step to run next (scheduled, built)
  std::unique_ptr<Sampled> unprocessed_;  // overlap: the last step's samples, not yet applied
  double last_forward_end_ = 0;         // 0 = the engine was idle since
};

}  // namespace deepinfer::engine
