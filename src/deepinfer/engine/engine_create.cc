// Engine::create: sizes the KV cache for the model, then builds the runner, the KV manager
// (with the KV store tier when one is configured), the scheduler and the speculator.
#include <algorithm>
#include <iterator>

#include "deepinfer/base/log.h"
#include "deepinfer/base/memory_info.h"
#include "deepinfer/engine/block_state_copy.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/engine_state.h"
#include "deepinfer/engine/kv_cache_plan.h"
#include "deepinfer/engine/speculative/draft_model_drafter.h"
#include "deepinfer/engine/speculative/mtp_drafter.h"
#include "deepinfer/engine/step_worker.h"

namespace deepinfer::engine {
namespace {

ModelRunnerConfig runner_config(const EngineConfig& config, const KvCachePlan& plan,
                                DType kv_dtype) {
  ModelRunnerConfig rc;
  rc.num_threads = config.num_threads;
  rc.block_size = plan.block_size;
  rc.num_kv_blocks = plan.num_blocks;
  rc.num_recent_slabs = plan.num_recent_slabs;
  rc.batch_invariant = config.batch_invariant;
  rc.int8_activations = config.int8_activations;
  rc.kv_dtype = kv_dtype;
  return rc;
}

KvCacheConfig kv_manager_config(const EngineConfig& config, const KvCachePlan& plan,
                                const model::KvCacheSpec& spec, const model::ModelConfig& mc) {
  KvCacheConfig kv;
  kv.num_blocks = plan.num_blocks;
  kv.block_size = plan.block_size;
  kv.num_recent_slabs = plan.num_recent_slabs;
  kv.recent_tokens = spec.recent_tokens;
  kv.saving_window = spec.saving_window;
  kv.enable_prefix_caching = config.enable_prefix_caching;
  kv.cache_namespace = config.kv_store_namespace.empty() ? mc.name + "/" + mc.architecture
                                                          : config.kv_store_namespace;
  return kv;
}

KvStoreTierOptions kv_store_tier_options(const EngineConfig& config, const std::string& cache_namespace) {
  KvStoreTierOptions to;
  to.dirs = config.kv_store_dirs;
  to.model_namespace = cache_namespace;
  to.compute_settings = config.int8_activations ? "matmul=int8" : "matmul=high";
  if (config.kv_store_host_tier_bytes > 0) to.host_tier_bytes = config.kv_store_host_tier_bytes;
  to.store_overrides.target_capacity_bytes = config.kv_store_target_capacity_bytes;
  std::copy(std::begin(config.kv_store_ttl_seconds), std::end(config.kv_store_ttl_seconds),
            to.store_overrides.ttl_seconds);
  return to;
}

Result<std::unique_ptr<speculative::Speculator>> make_speculator(const EngineConfig& config,
                                                                 ModelRunner& runner, const KvCachePlan& plan,
                                                                 const recipe::Tokenizer& tokenizer) {
  DI_RETURN_IF_ERROR(speculative::validate(config.speculative));
  // Hybrid state (DeepSeek-V4) needs no rollback either: every recent row and paged entry is
  // addressed by its absolute position and depends only on tokens up to it, and a position is
  // read only by later ones; so what rejected drafts wrote (even an entry whose compression
  // window one of them closed) lies at positions >= num_computed_tokens and is written again
  // before anything reads it. Slabs are released by num_computed_tokens, i.e. accepted
  // tokens only (docs/speculative.md; tests/unit/speculative/hybrid_spec_test.cc).
  std::unique_ptr<speculative::Drafter> drafter;  // null = n-gram
  const speculative::DraftTarget t{&runner.model_config(), runner.pool(), plan.block_size, plan.num_blocks,
                                   config.max_num_seqs, config.batch_invariant, config.int8_activations,
                                   config.kv_cache_dtype, tokenizer.eos_ids()};
  if (config.speculative.method == "draft") {
    DI_ASSIGN_OR_RETURN(drafter, speculative::make_configured_draft_model_drafter(config.speculative, t));
  } else if (config.speculative.method == "mtp") {
    DI_ASSIGN_OR_RETURN(drafter, speculative::make_mtp_drafter(runner.model(), t));
  }
  return std::make_unique<speculative::Speculator>(config.speculative, std::move(drafter));
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(std::unique_ptr<model::Model> model,
                                               std::shared_ptr<const recipe::Tokenizer> tokenizer,
                                               const EngineConfig& config) {
  if (config.block_size <= 0 || config.max_num_seqs <= 0 || config.max_num_batched_tokens <= 0)
    return invalid_argument("engine: block_size, max_num_seqs and max_num_batched_tokens must be > 0");
  std::unique_ptr<Engine> e(new Engine());
  e->config_ = config;
  e->tokenizer_ = std::move(tokenizer);
  model::KvCacheSpec spec = model->kv_cache_spec();
  DI_ASSIGN_OR_RETURN(spec.dtype, model::resolve_kv_cache_dtype(config.kv_cache_dtype, spec,
                                                                model->config().architecture));
  KvCachePlanInput pin;
  pin.kv_cache_bytes = config.kv_cache_bytes;
  pin.block_size = config.block_size;
  pin.max_num_seqs = config.max_num_seqs;
  pin.max_num_batched_tokens = config.max_num_batched_tokens;
  const KvCachePlan plan = plan_kv_cache(spec, pin);
  // The pool is mapped lazily (pages become resident as blocks fill), so a pool the machine
  // cannot hold would only fail later, under load: refuse it now.
  if (const auto avail = available_memory_bytes(); avail && config.kv_cache_bytes > *avail)
    return resource_exhausted(
        "KV cache: {:.2f} GiB asked for (--kv-cache-gb) but this machine has {:.2f} GiB of memory "
        "available (MemAvailable in /proc/meminfo); ask for less",
        double(config.kv_cache_bytes) / double(1 << 30), double(*avail) / double(1 << 30));
  if (plan.block_size != config.block_size)
    log::info("KV block size {} raised to {} (a multiple of {}, the model's compression ratios)",
              config.block_size, plan.block_size, spec.block_size_multiple);
  e->config_.block_size = plan.block_size;
  e->runner_ = std::make_unique<ModelRunner>(std::move(model), runner_config(config, plan, spec.dtype));
  const KvCacheConfig kv = kv_manager_config(config, plan, spec, e->runner_->model_config());
  DI_RETURN_IF_ERROR(validate(kv));
  KvTierHook* hook = nullptr;
  if (!config.kv_store_dirs.empty() || config.kv_store_ram_only) {
    DI_ASSIGN_OR_RETURN(e->kv_tier_, make_kv_store_tier(kv_store_tier_options(config, kv.cache_namespace),
                                                        e->runner_->kv_cache()));
    hook = e->kv_tier_.get();
  }
  if (spec.has_recent()) e->block_copier_ = std::make_unique<KvBlockStateCopier>(e->runner_->kv_cache());
  e->kv_manager_ = std::make_unique<KvCacheManager>(kv, hook, e->block_copier_.get());
  if (e->kv_tier_) e->kv_tier_->set_recent_slabs(&e->kv_manager_->recent_slabs());
  SchedulerConfig sc;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_num_batched_tokens = config.max_num_batched_tokens;
  DI_RETURN_IF_ERROR(validate(sc));
  e->scheduler_ = std::make_unique<Scheduler>(sc, *e->kv_manager_);
  if (!config.speculative.method.empty()) {
    DI_ASSIGN_OR_RETURN(e->speculator_, make_speculator(config, *e->runner_, plan, *e->tokenizer_));
  }
  e->overlap_ = config.overlap_scheduling && !e->kv_tier_ && !e->speculator_;
  if (e->overlap_) e->worker_ = std::make_unique<StepWorker>();
  return e;
}

}  // namespace deepinfer::engine
