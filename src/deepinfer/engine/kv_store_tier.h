// The KV store (kvstore::KvStore, host RAM over SSD targets) as the engine's lower KV tier: a
// block's value is every layer's K and V for that block, keyed by a namespaced SHA-256 chain.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <unordered_map>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/kv_cache_manager.h"
#include "deepinfer/engine/kv_export.h"
#include "deepinfer/kvstore/key.h"
#include "deepinfer/kvstore/kv_store.h"
#include "deepinfer/model/model.h"

namespace deepinfer::engine {

// Bumped whenever the byte layout of a stored block (gather order below) changes.
inline constexpr uint32_t kKvStoreLayoutVersion = 1;
// Hybrid caches: the layout of stored blocks (paged state only) and of sliding-window
// checkpoints (kv_store_checkpoint.cc); part of a hybrid namespace's revision.
inline constexpr uint32_t kSwaCheckpointVersion = 1;

struct KvStoreTierOptions {
  std::vector<std::string> dirs;  // SSD target directories (same order in every process)
  size_t host_tier_bytes = size_t{256} << 20;
  std::string model_namespace;  // model id + weights digest: blocks never cross it
  // Every engine setting that changes the computed KV values (e.g. "matmul=int8"); part of
  // the namespace so a differently computed block is never served.
  std::string compute_settings;
  // Advanced: passed through to the store (tests shorten the sweeper, inject clocks...).
  kvstore::KvStoreConfig store_overrides;
  std::chrono::milliseconds prefetch_timeout = std::chrono::seconds(10);
};

struct KvStoreTierStats {
  int64_t lookups = 0;         // lookup_prefix calls
  int64_t offered_blocks = 0;  // blocks the store said it holds
  int64_t loaded_blocks = 0;
  int64_t load_misses = 0;     // offered but then gone/unreadable when loading
  int64_t written_blocks = 0;  // accepted by batch_put
  int64_t write_rejects = 0;   // handed to batch_put but not accepted (queue full)
  int64_t prefetches = 0;      // background prefix reads started for waiting sequences
  int64_t prefetched_blocks = 0;  // blocks those reads found (now in the host tier)
  int64_t prefetch_timeouts = 0;  // reads given up on: those sequences computed their prefix
  int64_t checkpoints_written = 0;  // sliding-window checkpoints handed to the store whole
  int64_t checkpoints_loaded = 0;   // restored into a sequence's recent slabs
  int64_t checkpoint_misses = 0;    // offered, then gone or unreadable when loading
  int64_t checkpoint_queries = 0;   // prefix ends checkpointed_prefix asked the store about
};

class KvStoreTier : public KvTierHook {
 public:
  // A prefix read still running after `prefetch_timeout` is given up on (a hung storage
  // target must not hold a request forever; it computes its prefix instead).
  KvStoreTier(std::unique_ptr<kvstore::KvStore> store, const kvstore::Namespace& ns,
              model::KvCache& storage,
              std::chrono::milliseconds prefetch_timeout = std::chrono::seconds(10));

  void on_blocks_cached(Sequence& seq, std::span<const int> indices,
                        std::span<const int32_t> blocks) override;
  int lookup_prefix(Sequence& seq, int first, int count) override;
  int load_blocks(Sequence& seq, int first, std::span<const int32_t> blocks) override;
  // Reads the prefix into the store's host tier on the store's reader thread (at most half the
  // host tier's capacity; admission loads anything beyond that directly).
  bool start_prefetch(Sequence& seq, int first, int count) override;
  bool prefetch_done(Sequence& seq) override;
  void on_sequence_released(const Sequence& seq) override;
  // Sliding-window checkpoints (hybrid caches; kv_store_checkpoint.cc): the recent rows of the
  // blocks a step after a prefix end reads, stored as parts of block_bytes() (the last one
  // zero-padded) under keys derived from the prefix's last block key, kind kSwaCheckpoint.
  void save_checkpoint(Sequence& seq, int end_blocks, std::span<const int32_t> blocks) override;
  int checkpointed_prefix(Sequence& seq, int first, int count, int min_count) override;
  bool load_checkpoint(Sequence& seq, int end_blocks, std::span<const int32_t> blocks) override;
  // Prefill/decode disaggregation: a sequence with a kv_export_tag whose prompt is computed
  // hands its full prompt blocks to the export sink, once.
  void before_sequence_freed(Sequence& seq) override;
  void set_export_sink(KvExportSink* sink, bool by_layer = true) {
    export_sink_ = sink;
    export_by_layer_ = by_layer;
  }
  // Layer-by-layer export (kv_layer_export.h) in the step about to run, for the sequences whose
  // prompt it completes: the callable for the forward's after_layer, or null when none of them
  // carries an export tag or the cache cannot be cut by layer (those export whole blocks when
  // freed, as above).
  std::function<void(int layer)> layer_exporter(const std::vector<Sequence*>& completing);
  // A block computed by another engine (its store key and KvStoreTier bytes) into the store's
  // RAM tier, where admissions find it like any stored block. Thread-safe (the store is).
  // False when `bytes` is not block_bytes() long or the store did not take it. `kind` as the
  // exporting engine sent it (a sliding-window checkpoint part is stored as one).
  bool import_block(const kvstore::BlockKey& key, std::span<const uint8_t> bytes,
                    kvstore::EntryKind kind = kvstore::EntryKind::kKvBlock);
  // Blocks the calling thread until some started prefetch finishes or `timeout` passes (the
  // engine calls it when every runnable sequence waits on a read, instead of spinning).
  void wait_for_prefetch(std::chrono::milliseconds timeout);

  // Hybrid caches: which slab holds each block's recent rows (the engine's KvCacheManager);
  // must be set before the first step.
  void set_recent_slabs(const RecentSlabs* slabs) { slabs_ = slabs; }

  // Copies block `block` of the storage into `dst` (block_bytes()) and back. Hybrid caches:
  // the block's paged state only (its recent rows go into checkpoints).
  [[nodiscard]] bool gather(int32_t block, uint8_t* dst) const;
  void scatter(const uint8_t* src, int32_t block);
  size_t block_bytes() const { return block_bytes_; }

  // Waits for queued SSD writes (tests; shutdown does it too).
  void flush() { store_->flush(); }
  const KvStoreTierStats& stats() const { return stats_; }
  kvstore::KvStoreStats store_stats() const { return store_->stats(); }
  const kvstore::Namespace& key_namespace() const { return ns_; }
  // The shared store's id ("" when the tier is RAM only): engines with the same id read each
  // other's blocks.
  std::string store_id() const { return store_->store_id(); }

 private:
  // Full prompt blocks an export sends: allocated and cacheable ones.
  int exportable_blocks(const Sequence& seq) const;
  // Extends seq.tier_keys to cover its first `n` full blocks.
  void ensure_keys(Sequence& seq, int n) const;
  // Checkpoints: how many blocks' rows the checkpoint at prefix end `end_blocks` holds, how many
  // store values it takes, and their keys.
  int checkpoint_blocks(int end_blocks) const;
  int checkpoint_parts(int num_blocks) const;
  std::vector<kvstore::BlockKey> checkpoint_keys(Sequence& seq, int end_blocks) const;
  // The recent rows of `blocks` (each with a slab), slab after slab, into dst.
  void pack_checkpoint(std::span<const int32_t> blocks, uint8_t* dst) const;
  // PD export of a computed prompt: after its blocks, the checkpoint at the end a decode
  // engine's hit reaches, as further export_block calls (indices from `first_index`); returns
  // how many values it sent (0 when the rows are gone or the cache has none).
  int export_checkpoint(Sequence& seq, int first_index);

  std::unique_ptr<kvstore::KvStore> store_;
  kvstore::Namespace ns_;
  kvstore::BlockKey root_;
  model::KvCache& storage_;
  const RecentSlabs* slabs_ = nullptr;
  size_t block_bytes_;
  std::vector<uint8_t> staging_;
  KvStoreTierStats stats_;
  struct Prefetch {
    std::future<size_t> done;
    std::chrono::steady_clock::time_point started;
    int first = 0;  // the sequence's first block it reads
  };
  std::unordered_map<int64_t, Prefetch> prefetches_;  // by sequence id, while reading
  // Blocks [first, end) of a sequence that its finished prefetch put in the host tier: its
  // admission looks only there, so the engine thread never waits on storage for it.
  struct Prefetched {
    int first = 0, end = 0;
  };
  std::unordered_map<int64_t, Prefetched> prefetched_;
  std::chrono::milliseconds prefetch_timeout_;
  KvExportSink* export_sink_ = nullptr;
  bool export_by_layer_ = true;
};

// Opens (creating if needed) the store over opts.dirs (none: a RAM-only store) for blocks of
// `storage`. The namespace is opts.model_namespace plus everything that changes a block's bytes
// (layout version, the KV dtype, block size, layer/head shapes).
Result<std::unique_ptr<KvStoreTier>> make_kv_store_tier(const KvStoreTierOptions& opts,
                                                        model::KvCache& storage);

}  // namespace deepinfer::engine
