// Paged KV bookkeeping for sequences: block tables, the prefix cache (radix tree over
// content-addressed full blocks) and the optional lower tier. Plans, then commits: a failed
// allocation changes nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/block_hash.h"
#include "deepinfer/engine/block_pool.h"
#include "deepinfer/engine/radix_tree.h"
#include "deepinfer/engine/recent_slabs.h"
#include "deepinfer/engine/sequence.h"

namespace deepinfer::engine {

// A slower tier below the in-memory pool (the KV store). Called on the scheduler thread. The
// tier names blocks its own way (the store wants cryptographic, namespaced keys; the radix tree
// uses cheap XXH3 chains), so calls carry the sequence and block indices, not radix keys; the
// tier may cache its keys in Sequence::tier_keys.
class KvTierHook {
 public:
  virtual ~KvTierHook() = default;
  // Full blocks `indices` of `seq`, held in `blocks`, were just computed and entered into the
  // prefix cache: write them down now (write-through, so other processes see them early).
  virtual void on_blocks_cached(Sequence& seq, std::span<const int> indices,
                                std::span<const int32_t> blocks) {}
  // `block` (radix key `key`) is about to be reused.
  virtual void on_block_evicted(const BlockHash& key, int32_t block) {}
  // How many of the sequence's full blocks first, first+1, ... (at most `count`) the tier can
  // supply, in order.
  virtual int lookup_prefix(Sequence& seq, int first, int count) = 0;
  // Fills blocks[i] with full block first+i of `seq`, in order, stopping at the first block that
  // is gone or unreadable; returns how many were filled.
  virtual int load_blocks(Sequence& seq, int first, std::span<const int32_t> blocks) = 0;
  // The sequence waits for admission and its full blocks first.. first+count-1 are not in
  // memory: start reading what the tier holds of them into a faster place in the background
  // (so that load_blocks at admission is quick). Returns true when admission can go ahead now
  // (nothing to read, or the read already finished), false while it is still reading.
  virtual bool start_prefetch(Sequence& seq, int first, int count) { return true; }
  // After start_prefetch returned false: whether that read has finished. A tier that gives up
  // on a read (storage not answering) sets seq.skip_tier and returns true: the sequence is then
  // admitted without the tier and computes its prefix.
  virtual bool prefetch_done(Sequence& seq) { return true; }
  // The sequence's blocks are about to be released (finished, aborted or preempted); its block
  // table still holds them. Prefill/decode disaggregation exports a computed prompt here.
  virtual void before_sequence_freed(Sequence& seq) {}
  // The sequence's blocks were released (finished, aborted or preempted): forget its prefetch.
  virtual void on_sequence_released(const Sequence& seq) {}

  // Hybrid caches (recent rows): a tier may keep a checkpoint of the recent rows at the end of
  // a cached prefix (the sliding windows and compressor tails a step after it reads), so that
  // a later hit ending there restores exactly without recomputing.
  // Keep one for the end of the sequence's first `end_blocks` full blocks: `blocks` are the
  // block ids of full blocks [end_blocks - blocks.size(), end_blocks), every one with its
  // exact recent rows in its slab.
  virtual void save_checkpoint(Sequence& seq, int end_blocks, std::span<const int32_t> blocks) {}
  // Of the `count` blocks from `first` that lookup_prefix offered, how many (0..count) reach the
  // furthest prefix end the tier holds a checkpoint for, looking only at the ends that reach at
  // least `min_count` of them (1..count; 0 when none of those has one). Each end asked about
  // may cost the tier a storage query (an SSD stat on a miss), on the engine thread.
  virtual int checkpointed_prefix(Sequence& seq, int first, int count, int min_count) { return 0; }
  // Fills the slabs of `blocks` (full blocks [end_blocks - blocks.size(), end_blocks); -1 =
  // leave that one alone) with the checkpoint of the prefix end `end_blocks`. False, having
  // written nothing usable, when it is gone or unreadable.
  virtual bool load_checkpoint(Sequence& seq, int end_blocks, std::span<const int32_t> blocks) {
    return false;
  }
};

// Copies a block's paged state (hybrid caches: compressed entries, indexer keys; not its
// recent rows) into another block, on the scheduler thread: a bounded replay's private copies.
class BlockStateCopier {
 public:
  virtual ~BlockStateCopier() = default;
  virtual void copy_block_state(int32_t from, int32_t to) = 0;
};

struct KvCacheConfig {
  int num_blocks = 0;
  int block_size = 16;
  // Hybrid caches (model::KvCacheSpec::has_recent): how many recent slabs there are, and how far
  // back a new token reads recent rows. 0 slabs: a plain K/V cache.
  int num_recent_slabs = 0;
  int recent_tokens = 0;
  // The model's decoder-side saving (model::KvCacheSpec::saving_window); 0: none.
  int saving_window = 0;
  bool enable_prefix_caching = true;
  std::string cache_namespace;  // model id (+ revision, KV dtype): blocks never cross it
};

Status validate(const KvCacheConfig& config);

// Cached prefix found for a sequence before admission; nothing is held until allocate_slots.
struct PrefixMatch {
  std::vector<int32_t> blocks;  // [matched blocks] in-memory cached blocks, in order
  int num_tier_blocks = 0;      // further blocks the lower tier offers to load
  // Hybrid caches: the prefix's last recent rows are gone and the sequence allows a bounded
  // replay: its last num_replay_tokens tokens are computed again (the window rebuilt).
  int num_replay_tokens = 0;
  // Tokens the sequence need not compute.
  int num_tokens(int block_size) const {
    return (static_cast<int>(blocks.size()) + num_tier_blocks) * block_size - num_replay_tokens;
  }
};

// Counters for metrics (/metrics, bench): prefix-cache effectiveness and pool pressure.
struct KvCacheStats {
  int64_t admissions = 0;          // allocate_slots calls that committed a prefix lookup
  int64_t admitted_tokens = 0;     // tokens of those sequences at admission
  int64_t hit_tokens = 0;          // of which served from memory or the lower tier
  int64_t memory_hit_tokens = 0;   // of hit_tokens: from the in-memory prefix cache
  int64_t tier_hit_tokens = 0;     // of hit_tokens: loaded from the lower tier
  int64_t evictions = 0;           // cached blocks reclaimed for new use
  int64_t tier_loaded_blocks = 0;  // blocks filled by KvTierHook::load_blocks
  int64_t tier_written_blocks = 0; // blocks handed to KvTierHook::on_blocks_cached
  int64_t replays = 0;             // admissions restored by a bounded replay
  int64_t replayed_tokens = 0;     // tokens those replays computed again
  int64_t checkpoints_saved = 0;   // sliding-window checkpoints handed to the tier
  int64_t checkpoints_loaded = 0;  // prefixes from the tier restored exactly by a checkpoint
};

class KvCacheManager {
 public:
  // `config` must pass validate(); `hook` (may be null) must outlive the manager.
  // `copier` (may be null: no bounded replay) must outlive the manager too.
  explicit KvCacheManager(const KvCacheConfig& config, KvTierHook* hook = nullptr,
                          BlockStateCopier* copier = nullptr);

  int block_size() const { return pool_.block_size(); }
  int recent_tokens() const { return config_.recent_tokens; }
  int num_blocks() const { return pool_.num_blocks(); }
  // Blocks an allocation could get now: never used plus cached-but-unreferenced.
  int num_available_blocks() const { return pool_.num_free() + tree_.num_evictable(); }
  int num_cached_blocks() const { return tree_.num_nodes(); }
  // Hybrid caches: the recent slab of every block (-1: none), for the forward batch.
  const RecentSlabs& recent_slabs() const { return slabs_; }

  // Longest cached prefix of the sequence's tokens, in whole blocks, leaving at least one token
  // to compute so that the step produces logits. Empty unless the sequence holds no blocks.
  PrefixMatch get_computed_blocks(Sequence& seq);

  // Whether the sequence may be admitted now as far as the lower tier is concerned: the first
  // call starts the tier's background read of the sequence's prompt blocks that are not in
  // memory; later calls say whether it finished. Always true without a tier.
  bool prefetch_ready(Sequence& seq);

  // Makes room for `num_new_tokens` more tokens after the sequence's computed ones (after
  // `prefix`, when given, which must come from get_computed_blocks on this sequence with no
  // allocation since). Returns the number of blocks newly taken from the pool, or nullopt,
  // changing nothing, when the pool cannot supply them. With a prefix, num_computed_tokens
  // becomes the prefix length (shorter if a tier load fails).
  [[nodiscard]] std::optional<int> allocate_slots(Sequence& seq, int num_new_tokens,
                                                  const PrefixMatch* prefix = nullptr);

  // Enters the sequence's full, computed blocks into the prefix cache. When a block with the
  // same key is already cached (another sequence computed the same prefix), the sequence
  // switches to the cached block and its own copy goes back to the pool. Hybrid caches: then
  // unpins the recent slabs that fell out of reach of the sequence's next step.
  void cache_full_blocks(Sequence& seq);

  // Empties the prefix cache of every block no sequence holds (they become free); returns how
  // many. Blocks in use stay cached.
  int reset_prefix_cache();

  // Hybrid caches: frees the recent rows of every cached block no sequence pins, as memory
  // pressure would (their paged state stays cached); returns how many slabs. For benchmarks
  // and tests of the restore paths (swa_restore).
  int drop_cached_recent_rows() { return slabs_.enabled() ? slabs_.drop_evictable() : 0; }

  // Releases every block the sequence holds; cached ones stay in the tree until evicted.
  void free(Sequence& seq);

  // Test/debug check: refcounts equal the number of `live` sequences holding each block and
  // every block is exactly one of: held, free, cached-unreferenced. Aborts when broken.
  void check_invariants(std::span<const Sequence* const> live) const;

  const KvCacheStats& stats() const { return stats_; }
  const RadixTree& tree() const { return tree_; }
  const BlockPool& pool() const { return pool_; }

 private:
  void ensure_block_hashes(Sequence& seq, int num_full_blocks) const;
  std::optional<int> allocate(Sequence& seq, int num_new_tokens, const PrefixMatch* prefix);
  // At admission: Sequence::tail_from / tail_end (decoder-side saving), or none.
  void plan_saving(Sequence& seq);
  // In-memory prefix of the sequence's first `max_blocks` blocks; for hybrid caches cut where
  // a block within recent_tokens of its end has lost its recent rows.
  std::vector<int32_t> match_in_memory(Sequence& seq, int max_blocks, bool trim = true);
  // First block whose recent rows a step starting at `position` reads.
  int first_recent_block(int position) const;
  // Hybrid caches, allocate_slots with a prefix: pins, tier load, trimming (see the .cc).
  int commit_hybrid_prefix(Sequence& seq, const PrefixMatch& prefix, int num_new_tokens);
  // Whether some block of the first `k` that a step after them reads has lost its recent rows.
  bool lacks_recent_rows(std::span<const int32_t> blocks) const;
  // Hybrid caches: get_computed_blocks (exact or bounded restore, see the .cc).
  PrefixMatch match_hybrid(Sequence& seq, int max_blocks);
  // Hybrid caches with a tier: the recent rows at the end of a tier prefix (blocks from
  // `first_tier_block` to `end_blocks` just loaded) from its checkpoint; false when missing.
  bool load_tier_checkpoint(Sequence& seq, int first_tier_block, int end_blocks);
  // Hybrid caches with a tier: hands the tier a checkpoint at that prefix end when exact.
  void save_checkpoint(Sequence& seq, int end_blocks);
  // Hybrid caches, allocate_slots with a prefix to replay (PrefixMatch::num_replay_tokens).
  std::optional<int> allocate_replayed(Sequence& seq, int num_new_tokens,
                                       const PrefixMatch& prefix);
  void unpin_recent_before(Sequence& seq, int new_from);
  void count_admission(const Sequence& seq, int memory_blocks, int tier_blocks);
  // cache_full_blocks; blocks before `write_from` came from the tier and are not written back.
  void commit_full_blocks(Sequence& seq, int write_from);
  int32_t take_block();
  void acquire(int32_t block);
  void release(int32_t block);

  KvCacheConfig config_;
  KvTierHook* hook_;
  BlockStateCopier* copier_;
  BlockPool pool_;
  RadixTree tree_;
  RecentSlabs slabs_;
  BlockHash root_hash_;
  KvCacheStats stats_;
};

}  // namespace deepinfer::engine
