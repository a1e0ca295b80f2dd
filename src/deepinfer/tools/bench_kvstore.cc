// TTFT per KV tier. For each prompt length and repetition, with a fresh random prompt:
//   cold       : a new engine, empty store: the whole prompt is prefilled (and written down);
//   engine_ram : the same prompt again on that engine: its own prefix cache;
//   store_ram  : the engine's prefix cache emptied (reset_prefix_cache): the store's RAM tier;
//   store_ssd  : the model reloaded and a new engine and store opened on the same targets (a
//                restart: empty RAM tiers), so the prefix comes from the SSD targets (Direct I/O
//                where the file system allows it, so not from the page cache).
// The store lives in fresh subdirectories of the --kv-store directories, removed at the end.
#include "deepinfer/tools/bench_kvstore.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "deepinfer/base/timer.h"
#include "deepinfer/tools/synthetic_prompt.h"

namespace deepinfer::tools {
namespace {

namespace fs = std::filesystem;

// Prompt seeds apart from the other benchmark modes' (0, 1, ...).
constexpr int kWarmupSeq = 99'999;
constexpr int kFirstSeq = 100'000;

struct Ttft {
  double ms = 0;
  int cached_tokens = 0;
  std::string error;
};

Ttft time_to_first_token(engine::Engine& engine, const std::vector<int32_t>& prompt) {
  engine::GenerationRequest r;
  r.prompt_ids = prompt;
  r.max_tokens = 1;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  Ttft t;
  const double t0 = now_seconds();
  auto id = engine.add_request(r);
  if (!id.is_ok()) {
    t.error = id.status().message();
    return t;
  }
  bool first = false;
  while (engine.has_unfinished()) {
    for (const engine::RequestOutput& out : engine.step()) {
      if (!first && !out.new_token_ids.empty()) {
        t.ms = (now_seconds() - t0) * 1e3;
        first = true;
      }
      if (out.finished) {
        t.cached_tokens = out.cached_tokens;
        if (!out.error.empty()) t.error = out.error;
      }
    }
  }
  if (!first && t.error.empty()) t.error = "no token was generated";
  return t;
}

}  // namespace

int run_kvstore_ttft_bench(const KvStoreBenchOptions& opts) {
  if (opts.engine.kv_store.empty())
    return report_error(invalid_argument("bench --mode kvstore needs --kv-store DIR (repeatable)"));
  if (opts.prompt_lens.empty()) return report_error(invalid_argument("bench --mode kvstore: no prompt lengths"));
  EngineFlags ef = opts.engine;
  ef.enable_prefix_caching = true;  // the hits measured are prefix-cache hits
  ef.kv_store.clear();
  const std::string run = fmt::format("deepinfer-bench-{}", ::getpid());
  for (const std::string& dir : opts.engine.kv_store) ef.kv_store.push_back((fs::path(dir) / run).string());
  struct Cleanup {
    std::vector<std::string> dirs;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& d : dirs) fs::remove_all(d, ec);
    }
  } cleanup{ef.kv_store};

  const int max_len = *std::max_element(opts.prompt_lens.begin(), opts.prompt_lens.end());
  auto open_engine = [&]() -> Result<std::unique_ptr<engine::Engine>> {
    DI_ASSIGN_OR_RETURN(LoadedModel loaded, load_model_for_cli(opts.engine.model));
    EngineFlags e = ef;
    if (e.kv_store_ram_gb <= 0) {
      // The store's RAM tier must hold the longest prompt twice over (prefetch uses half).
      model::KvCacheSpec spec = loaded.model->kv_cache_spec();
      DI_ASSIGN_OR_RETURN(spec.dtype, model::resolve_kv_cache_dtype(e.kv_cache_dtype, spec,
                                                                    loaded.model->config().architecture));
      const double per_token = double(model::KvCache::bytes_per_block(spec, 16) +
                                      model::KvCache::bytes_per_recent_slab(spec, 16)) / 16;
      e.kv_store_ram_gb = std::max(0.25, 2.5 * per_token * max_len / double(size_t{1} << 30));
    }
    DI_ASSIGN_OR_RETURN(auto eng, make_engine(loaded, e));
    // Warm-up on an unrelated prompt: page faults and first-touch costs stay out of the numbers.
    const auto vocab = static_cast<int32_t>(eng->model_config().vocab_size);
    Ttft w = time_to_first_token(*eng, synthetic_prompt(48, kWarmupSeq, vocab));
    if (!w.error.empty()) return Status(StatusCode::kInternal, "bench warm-up: " + w.error);
    return eng;
  };

  for (int len : opts.prompt_lens) {
    for (int rep = 0; rep < opts.repeat; ++rep) {
      auto first = open_engine();
      if (!first.is_ok()) return report_error(first.status());
      const int32_t vocab = static_cast<int32_t>((*first)->model_config().vocab_size);
      const std::vector<int32_t> prompt = synthetic_prompt(len, kFirstSeq + len * 100 + rep, vocab);
      auto report = [&](const char* tier, const Ttft& t, const engine::Engine& e) {
        nlohmann::json j = {{"mode", "kvstore"}, {"batch", 1}, {"prompt_tokens", len}, {"tier", tier},
                            {"repeat", rep}, {"ttft_ms", t.ms}, {"cached_tokens", t.cached_tokens},
                            {"threads", e.num_threads()}, {"targets", ef.kv_store.size()}};
        if (const engine::KvStoreTier* tier_ptr = e.kv_store_tier()) {
          const kvstore::KvStoreStats s = tier_ptr->store_stats();
          // Bytes of KV the hit supplied (what a store hit had to move).
          j["hit_kv_bytes"] = double(tier_ptr->block_bytes()) * double(t.cached_tokens) /
                              double(std::max<uint32_t>(1, tier_ptr->key_namespace().block_tokens));
          j["store_puts_dropped"] = s.puts_dropped;
          j["io_uring"] = s.io_uring;
        }
        if (!t.error.empty()) j["error"] = t.error;
        std::printf("%s\n", j.dump().c_str());
        std::fflush(stdout);
        return t.error.empty();
      };
      engine::Engine& e1 = **first;
      if (!report("cold", time_to_first_token(e1, prompt), e1)) return kExitRuntimeError;
      e1.flush_kv_store();  // every block on the targets before the restart
      if (!report("engine_ram", time_to_first_token(e1, prompt), e1)) return kExitRuntimeError;
      e1.reset_prefix_cache();
      if (!report("store_ram", time_to_first_token(e1, prompt), e1)) return kExitRuntimeError;
      first->reset();  // "restart"
      auto second = open_engine();
      if (!second.is_ok()) return report_error(second.status());
      if (!report("store_ssd", time_to_first_token(**second, prompt), **second)) return kExitRuntimeError;
    }
  }
  return kExitOk;
}

}  // namespace deepinfer::tools
