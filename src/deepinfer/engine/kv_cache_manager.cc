// Block accounting for sequences. Ordering matters in allocate_slots: prefix blocks are
// acquired (and their recent slabs pinned) before fresh blocks and slabs are taken, so an
// eviction can never take a block or a slab just matched.
#include "deepinfer/engine/kv_cache_manager.h"

#include <algorithm>
#include <limits>

#include "deepinfer/base/check.h"
#include "deepinfer/engine/image_block_keys.h"

namespace deepinfer::engine {

Status validate(const KvCacheConfig& config) {
  if (config.block_size <= 0 || config.block_size > 4096)
    return invalid_argument("kv cache block_size {} must be in [1, 4096]", config.block_size);
  if (config.num_blocks <= 0)
    return invalid_argument("kv cache num_blocks {} must be positive", config.num_blocks);
  if (config.num_recent_slabs < 0 || config.recent_tokens < 0)
    return invalid_argument("kv cache: {} recent slabs, {} recent tokens", config.num_recent_slabs,
                            config.recent_tokens);
  return Status::ok();
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config, KvTierHook* hook,
                               BlockStateCopier* copier)
    : config_(config),
      hook_(hook),
      copier_(copier),
      pool_(config.num_blocks, config.block_size),
      slabs_(config.num_blocks, config.num_recent_slabs),
      root_hash_(root_block_hash(config.cache_namespace)) {}

int KvCacheManager::first_recent_block(int position) const {
  return std::max(0, position - config_.recent_tokens) / block_size();
}

bool KvCacheManager::lacks_recent_rows(std::span<const int32_t> blocks) const {
  const int k = static_cast<int>(blocks.size());
  for (int j = first_recent_block(k * block_size()); j < k; ++j)
    if (slabs_.slab_of(blocks[j]) < 0) return true;
  return false;
}

std::vector<int32_t> KvCacheManager::match_in_memory(Sequence& seq, int max_blocks, bool trim) {
  ensure_block_hashes(seq, max_blocks);
  std::vector<int32_t> blocks =
      tree_.match(std::span<const BlockHash>(seq.block_hashes.data(), max_blocks));
  if (!slabs_.enabled() || !trim) return blocks;
  // A hit ending after block k-1 must still have the recent rows its first step reads.
  int k = static_cast<int>(blocks.size());
  while (k > 0) {
    int missing = -1;
    for (int j = k - 1; j >= first_recent_block(k * block_size()); --j)
      if (slabs_.slab_of(blocks[j]) < 0) {
        missing = j;
        break;
      }
    if (missing < 0) break;
    k = missing;
  }
  blocks.resize(k);
  return blocks;
}

void KvCacheManager::ensure_block_hashes(Sequence& seq, int num_full_blocks) const {
  const int bs = block_size();
  DI_CHECK(num_full_blocks * bs <= seq.num_tokens(), "seq {}: {} full blocks of {} tokens",
           seq.id, num_full_blocks, seq.num_tokens());
  std::vector<int32_t> tokens(bs);
  for (int i = static_cast<int>(seq.block_hashes.size()); i < num_full_blocks; ++i) {
    for (int t = 0; t < bs; ++t) tokens[t] = seq.token_at(i * bs + t);
    const BlockHash& parent = i == 0 ? root_hash_ : seq.block_hashes[i - 1];
    seq.block_hashes.push_back(chain_block_hash(parent, tokens, image_block_extra(seq, i * bs, bs)));
  }
}

PrefixMatch KvCacheManager::get_computed_blocks(Sequence& seq) {
  PrefixMatch match;
  if (!config_.enable_prefix_caching || !seq.block_table.empty() || seq.num_computed_tokens != 0 ||
      seq.skip_prefix_cache)
    return match;
  // Never the whole sequence: the last token must run through the model to give logits.
  const int max_blocks = (seq.num_tokens() - 1) / block_size();
  if (max_blocks <= 0) return match;
  if (slabs_.enabled()) return match_hybrid(seq, max_blocks);
  match.blocks = match_in_memory(seq, max_blocks);
  if (hook_ != nullptr && !seq.skip_tier && static_cast<int>(match.blocks.size()) < max_blocks) {
    const int first = static_cast<int>(match.blocks.size());
    int n = hook_->lookup_prefix(seq, first, max_blocks - first);
    match.num_tier_blocks = std::clamp(n, 0, max_blocks - static_cast<int>(match.blocks.size()));
  }
  return match;
}

// Hybrid caches. Exact: the in-memory prefix cut where a block the next step reads has lost
// its recent rows, then the tier's blocks up to the furthest end it holds a checkpoint for.
// Bounded (when the sequence allows it): the longest prefix whose paged state is anywhere,
// memory or tier, with its last recent_tokens replayed; chosen only when it reaches further
// than the exact restore and is longer than the replay. So when bounded may be chosen and the
// hit is longer than the replay, a checkpoint short of the tier hit's end loses to the replay:
// the tier is asked about that one end only (or none, when memory reaches further), instead of
// every end of the hit (a store query each, on the engine thread).
PrefixMatch KvCacheManager::match_hybrid(Sequence& seq, int max_blocks) {
  PrefixMatch match;
  match.blocks = match_in_memory(seq, max_blocks, true);
  const int k = static_cast<int>(match.blocks.size());
  const bool may_replay = seq.allow_bounded_replay && copier_ != nullptr;
  std::vector<int32_t> full;
  if (may_replay) full = match_in_memory(seq, max_blocks, false);
  const int in_memory = static_cast<int>(full.size());
  int tier = 0, tier_exact = 0;
  if (hook_ != nullptr && !seq.skip_tier && k < max_blocks) {
    tier = std::clamp(hook_->lookup_prefix(seq, k, max_blocks - k), 0, max_blocks - k);
    const bool replay_beats_short = may_replay && std::max(in_memory, k + tier) * block_size() >
                                                      config_.recent_tokens;
    if (tier > 0 && !(replay_beats_short && in_memory > k + tier))
      tier_exact = std::clamp(
          hook_->checkpointed_prefix(seq, k, tier, replay_beats_short ? tier : 1), 0, tier);
  }
  match.num_tier_blocks = tier_exact;
  if (!may_replay) return match;
  const int reach = std::max(in_memory, k + tier);
  if (reach * block_size() <= config_.recent_tokens || reach <= k + tier_exact) return match;
  match.blocks = std::move(full);
  match.num_tier_blocks = std::max(0, k + tier - in_memory);
  match.num_replay_tokens = config_.recent_tokens;
  return match;
}

bool KvCacheManager::prefetch_ready(Sequence& seq) {
  if (seq.tier_prefetch == TierPrefetch::kReady) return true;
  if (hook_ == nullptr || !config_.enable_prefix_caching || !seq.block_table.empty() ||
      seq.num_computed_tokens != 0 || seq.skip_prefix_cache) {
    seq.tier_prefetch = TierPrefetch::kReady;
    return true;
  }
  if (seq.tier_prefetch == TierPrefetch::kNotStarted) {
    const int max_blocks = (seq.num_tokens() - 1) / block_size();
    int in_memory = 0;
    if (max_blocks > 0) in_memory = static_cast<int>(match_in_memory(seq, max_blocks).size());
    if (in_memory >= max_blocks) {
      seq.tier_prefetch = TierPrefetch::kReady;
      return true;
    }
    seq.tier_prefetch = TierPrefetch::kLoading;
    if (hook_->start_prefetch(seq, in_memory, max_blocks - in_memory))
      seq.tier_prefetch = TierPrefetch::kReady;
    return seq.tier_prefetch == TierPrefetch::kReady;
  }
  if (hook_->prefetch_done(seq)) seq.tier_prefetch = TierPrefetch::kReady;
  return seq.tier_prefetch == TierPrefetch::kReady;
}

int32_t KvCacheManager::take_block() {
  if (auto b = pool_.take_free()) return *b;
  auto ev = tree_.evict_lru();
  DI_CHECK(ev.has_value(), "no block to take although the plan said there was one");
  ++stats_.evictions;
  if (hook_ != nullptr) hook_->on_block_evicted(ev->key, ev->block);
  DI_CHECK(pool_.ref(ev->block) == 0, "evicted block {} is referenced", ev->block);
  if (slabs_.enabled()) slabs_.detach(ev->block);
  pool_.incref(ev->block);
  return ev->block;
}

void KvCacheManager::acquire(int32_t block) {
  if (pool_.ref(block) == 0) tree_.set_referenced(block, true);
  pool_.incref(block);
}

void KvCacheManager::release(int32_t block) {
  if (pool_.decref(block) > 0) return;
  if (tree_.contains(block)) {
    tree_.set_referenced(block, false);
  } else {
    if (slabs_.enabled()) slabs_.detach(block);
    pool_.put_free(block);
  }
}

std::optional<int> KvCacheManager::allocate_slots(Sequence& seq, int num_new_tokens,
                                                  const PrefixMatch* prefix) {
  std::optional<int> r = allocate(seq, num_new_tokens, prefix);
  if (r && prefix != nullptr) plan_saving(seq);
  return r;
}

// Decoder-side saving: decided once per admission, from where the computation starts (after the
// hit, or at the replay's start) and the span admitted.
void KvCacheManager::plan_saving(Sequence& seq) {
  seq.tail_from = -1;
  seq.tail_end = 0;
  if (config_.saving_window <= 0 || !slabs_.enabled() || !seq.allow_bounded_replay ||
      seq.skip_prefix_cache)
    return;
  const int from = seq.num_tokens() - config_.saving_window;
  if (from <= seq.num_computed_tokens) return;  // every token is in the last window: no saving
  seq.tail_from = from;
  seq.tail_end = seq.num_tokens();
}

std::optional<int> KvCacheManager::allocate(Sequence& seq, int num_new_tokens,
                                            const PrefixMatch* prefix) {
  DI_CHECK(num_new_tokens >= 0, "seq {}: num_new_tokens {}", seq.id, num_new_tokens);
  const int bs = block_size();
  int num_prefix = 0;
  int num_tier = 0;
  int reusable_unreferenced = 0;  // matched blocks that currently count as evictable
  if (prefix != nullptr) {
    DI_CHECK(seq.block_table.empty() && seq.num_computed_tokens == 0,
             "seq {}: prefix given to a sequence that already holds blocks", seq.id);
    num_prefix = static_cast<int>(prefix->blocks.size());
    num_tier = prefix->num_tier_blocks;
    if (prefix->num_replay_tokens > 0) return allocate_replayed(seq, num_new_tokens, *prefix);
    for (int32_t b : prefix->blocks) reusable_unreferenced += pool_.ref(b) == 0 ? 1 : 0;
  }
  const int computed = seq.num_computed_tokens + (num_prefix + num_tier) * bs;
  const int total_tokens = computed + num_new_tokens;
  const int blocks_needed = (total_tokens + bs - 1) / bs;
  const int held = static_cast<int>(seq.block_table.size()) + num_prefix;
  const int num_fresh = std::max(0, blocks_needed - held);
  if (num_fresh > num_available_blocks() - reusable_unreferenced) return std::nullopt;
  if (slabs_.enabled()) {
    // Slabs: one per fresh block of a running sequence. With a prefix: the fresh blocks near
    // the prefix's end and after it (a tier load only gets slabs there), plus, when a tier
    // load could fail, the blocks of the new tokens after the in-memory prefix. The matched
    // blocks whose rows get pinned no longer count as available.
    int need = num_fresh, matched_evictable = 0;
    if (prefix != nullptr) {
      const int from_k = first_recent_block(num_prefix * bs);
      for (int i = from_k; i < num_prefix; ++i)
        matched_evictable += slabs_.is_evictable(prefix->blocks[i]) ? 1 : 0;
      need = blocks_needed - std::max(num_prefix, first_recent_block(computed));
      if (num_tier > 0) need += (num_prefix * bs + num_new_tokens + bs - 1) / bs - num_prefix;
    }
    if (need > slabs_.num_available() - matched_evictable) return std::nullopt;
    if (prefix != nullptr) {
      commit_hybrid_prefix(seq, *prefix, num_new_tokens);
      return num_fresh;
    }
  }

  // Commit.
  if (prefix != nullptr) {
    for (int32_t b : prefix->blocks) {
      acquire(b);
      seq.block_table.push_back(b);
    }
    seq.num_committed_blocks = num_prefix;
  }
  for (int i = 0; i < num_fresh; ++i) {
    seq.block_table.push_back(take_block());
    if (slabs_.enabled()) {
      DI_CHECK(slabs_.attach(seq.block_table.back()), "seq {}: no recent slab left", seq.id);
      slabs_.pin(seq.block_table.back());
    }
  }
  if (prefix != nullptr) {
    int loaded = 0;
    if (num_tier > 0) {
      std::span<const int32_t> dst(seq.block_table.data() + num_prefix, num_tier);
      loaded = std::clamp(hook_->load_blocks(seq, num_prefix, dst), 0, num_tier);
    }
    seq.num_computed_tokens = (num_prefix + loaded) * bs;
    commit_full_blocks(seq, num_prefix + loaded);  // loaded blocks are full and computed
    count_admission(seq, num_prefix, loaded);
  }
  return num_fresh;
}

// A bounded replay: the prefix's blocks from the one holding its first replayed token on are
// copied (paged state only) into private blocks with fresh recent slabs, which the replay
// fills; the cached originals keep their exact state and lose nothing. Blocks from the tier
// are loaded into fresh blocks first (paged state only); those before the replay enter the
// prefix cache. If the tier fails to supply them, nothing is kept and the sequence is admitted
// from its exact in-memory prefix instead.
std::optional<int> KvCacheManager::allocate_replayed(Sequence& seq, int num_new_tokens,
                                                     const PrefixMatch& prefix) {
  const int bs = block_size();
  const int k = static_cast<int>(prefix.blocks.size());
  const int num_tier = prefix.num_tier_blocks;
  const int end = k + num_tier;
  DI_CHECK(prefix.num_replay_tokens <= end * bs && copier_ != nullptr && slabs_.enabled() &&
               (num_tier == 0 || hook_ != nullptr),
           "seq {}: replay of {} tokens after {}+{} blocks", seq.id, prefix.num_replay_tokens, k,
           num_tier);
  const int replay_start = end * bs - prefix.num_replay_tokens;
  const int f = replay_start / bs;
  const int blocks_needed = std::max(end, (replay_start + num_new_tokens + bs - 1) / bs);
  int unreferenced = 0;
  for (int32_t b : prefix.blocks) unreferenced += pool_.ref(b) == 0 ? 1 : 0;
  const int num_fresh = blocks_needed - k + std::max(0, k - f);
  if (num_fresh > num_available_blocks() - unreferenced) return std::nullopt;
  if (blocks_needed - f > slabs_.num_available()) return std::nullopt;
  // Commit: hold every matched block first, so that taking fresh ones cannot evict them.
  for (int32_t b : prefix.blocks) {
    acquire(b);
    seq.block_table.push_back(b);
  }
  for (int i = k; i < end; ++i) seq.block_table.push_back(take_block());
  if (num_tier > 0) {
    std::span<const int32_t> dst(seq.block_table.data() + k, num_tier);
    if (std::clamp(hook_->load_blocks(seq, k, dst), 0, num_tier) < num_tier) {
      for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) release(*it);
      seq.block_table.clear();
      PrefixMatch exact;
      exact.blocks = match_in_memory(seq, k, true);
      return allocate(seq, num_new_tokens, &exact);
    }
  }
  for (int i = f; i < blocks_needed; ++i) {
    const int32_t fresh = i < k || i >= end ? take_block() : seq.block_table[i];
    DI_CHECK(slabs_.attach(fresh), "seq {}: no recent slab left", seq.id);
    slabs_.pin(fresh);
    if (i < k) {
      copier_->copy_block_state(seq.block_table[i], fresh);
      release(seq.block_table[i]);
      seq.block_table[i] = fresh;
    } else if (i >= end) {
      seq.block_table.push_back(fresh);
    }
  }
  seq.num_committed_blocks = std::min(k, f);
  seq.cache_limit_block = f;
  seq.recent_from_block = f;
  seq.num_computed_tokens = replay_start;
  seq.replay_start = replay_start;
  seq.replay_end = end * bs;
  seq.num_replayed_tokens += prefix.num_replay_tokens;
  commit_full_blocks(seq, f);  // tier blocks before the replay: cached, not written back
  const int from_memory = std::min(k * bs, replay_start);
  ++stats_.admissions;
  ++stats_.replays;
  stats_.admitted_tokens += seq.num_tokens();
  stats_.hit_tokens += replay_start;
  stats_.memory_hit_tokens += from_memory;
  stats_.tier_hit_tokens += replay_start - from_memory;
  stats_.tier_loaded_blocks += num_tier;
  stats_.replayed_tokens += prefix.num_replay_tokens;
  return num_fresh;
}

// Hybrid caches with a tier: a checkpoint of the recent rows at the end of the sequence's first
// `end_blocks` full blocks, when those blocks are cached and every block a step after them
// reads still holds its exact rows (never rows rebuilt by a bounded replay: those lie at or
// after cache_limit_block), and never rows of a sequence with a decoder-side saving (tail_from).
void KvCacheManager::save_checkpoint(Sequence& seq, int end_blocks) {
  if (!slabs_.enabled() || hook_ == nullptr || !config_.enable_prefix_caching || end_blocks <= 0 ||
      seq.tail_from >= 0 ||
      end_blocks > seq.num_committed_blocks || end_blocks > seq.cache_limit_block ||
      end_blocks == seq.checkpoint_end_block)
    return;
  const int from = first_recent_block(end_blocks * block_size());
  for (int j = from; j < end_blocks; ++j)
    if (slabs_.slab_of(seq.block_table[j]) < 0) return;
  hook_->save_checkpoint(seq, end_blocks,
                         std::span<const int32_t>(seq.block_table.data() + from, end_blocks - from));
  seq.checkpoint_end_block = end_blocks;
  ++stats_.checkpoints_saved;
}

void KvCacheManager::count_admission(const Sequence& seq, int memory_blocks, int tier_blocks) {
  ++stats_.admissions;
  stats_.admitted_tokens += seq.num_tokens();
  stats_.hit_tokens += seq.num_computed_tokens;
  stats_.memory_hit_tokens += int64_t{memory_blocks} * block_size();
  stats_.tier_hit_tokens += int64_t{tier_blocks} * block_size();
  stats_.tier_loaded_blocks += tier_blocks;
}

// Hybrid caches: the prefix's blocks within recent_tokens of its end are pinned first; a tier
// load gets slabs only for the blocks near its end. A partial tier load is dropped (its
// blocks near the shorter end have no recent rows): the sequence computes from the in-memory
// prefix, and the blocks it no longer needs go back.
int KvCacheManager::commit_hybrid_prefix(Sequence& seq, const PrefixMatch& prefix,
                                         int num_new_tokens) {
  const int bs = block_size();
  const int k = static_cast<int>(prefix.blocks.size());
  const int num_tier = prefix.num_tier_blocks;
  const int from_k = first_recent_block(k * bs);
  for (int i = 0; i < k; ++i) {
    const int32_t b = prefix.blocks[i];
    acquire(b);
    seq.block_table.push_back(b);
    if (i >= from_k) slabs_.pin(b);
  }
  seq.num_committed_blocks = k;
  const int from_tier_end = first_recent_block((k + num_tier) * bs);
  const int blocks_needed = ((k + num_tier) * bs + num_new_tokens + bs - 1) / bs;
  while (static_cast<int>(seq.block_table.size()) < blocks_needed) {
    const int32_t b = take_block();
    if (static_cast<int>(seq.block_table.size()) >= from_tier_end)
      DI_CHECK(slabs_.attach(b), "seq {}: no recent slab left", seq.id);
    seq.block_table.push_back(b);
  }
  int loaded = 0;
  if (num_tier > 0) {
    std::span<const int32_t> dst(seq.block_table.data() + k, num_tier);
    loaded = std::clamp(hook_->load_blocks(seq, k, dst), 0, num_tier);
    if (loaded < num_tier || !load_tier_checkpoint(seq, k, k + num_tier)) loaded = 0;
  }
  seq.num_computed_tokens = (k + loaded) * bs;
  const int keep_blocks = (seq.num_computed_tokens + num_new_tokens + bs - 1) / bs;
  while (static_cast<int>(seq.block_table.size()) > keep_blocks) {
    const int32_t b = seq.block_table.back();
    seq.block_table.pop_back();
    slabs_.detach(b);
    release(b);
  }
  const int from = first_recent_block(seq.num_computed_tokens);
  for (int i = from_k; i < std::min(from, k); ++i) slabs_.unpin(seq.block_table[i], true);
  for (int i = std::max(from, k); i < static_cast<int>(seq.block_table.size()); ++i) {
    DI_CHECK(slabs_.attach(seq.block_table[i]), "seq {}: no recent slab left", seq.id);
    slabs_.pin(seq.block_table[i]);
  }
  seq.recent_from_block = from;
  commit_full_blocks(seq, k + loaded);  // loaded blocks are full and computed
  count_admission(seq, k, loaded);
  return loaded;
}

bool KvCacheManager::load_tier_checkpoint(Sequence& seq, int first_tier_block, int end_blocks) {
  const int from = first_recent_block(end_blocks * block_size());
  std::vector<int32_t> blocks;  // in-memory blocks keep their own (identical) rows
  for (int j = from; j < end_blocks; ++j)
    blocks.push_back(j < first_tier_block ? -1 : seq.block_table[j]);
  if (!hook_->load_checkpoint(seq, end_blocks, blocks)) return false;
  seq.checkpoint_end_block = end_blocks;  // the tier has it: not written again
  ++stats_.checkpoints_loaded;
  return true;
}

void KvCacheManager::unpin_recent_before(Sequence& seq, int new_from) {
  new_from = std::min(new_from, static_cast<int>(seq.block_table.size()));
  for (int i = seq.recent_from_block; i < new_from; ++i)
    slabs_.unpin(seq.block_table[i], tree_.contains(seq.block_table[i]));
  seq.recent_from_block = std::max(seq.recent_from_block, new_from);
}

void KvCacheManager::cache_full_blocks(Sequence& seq) {
  if (seq.tail_from >= 0) {
    // Decoder-side saving: the rows are approximate, so they leave with the pins (the blocks
    // are not cached yet), then the blocks out of reach enter the cache without them.
    unpin_recent_before(seq, first_recent_block(seq.num_computed_tokens));
    commit_full_blocks(seq, 0);
    return;
  }
  commit_full_blocks(seq, 0);
  if (!slabs_.enabled()) return;
  if (!seq.prompt_checkpointed && seq.num_computed_tokens >= seq.num_prompt_tokens()) {
    // Where a later request with this prompt hits: its last full block before the last token.
    seq.prompt_checkpointed = true;
    save_checkpoint(seq, (seq.num_prompt_tokens() - 1) / block_size());
  }
  unpin_recent_before(seq, first_recent_block(seq.num_computed_tokens));
}

void KvCacheManager::commit_full_blocks(Sequence& seq, int write_from) {
  if (!config_.enable_prefix_caching) return;
  int full = std::min({seq.num_computed_tokens / block_size(),
                      static_cast<int>(seq.block_table.size()), seq.cache_limit_block});
  if (seq.tail_from >= 0) full = std::min(full, seq.recent_from_block);  // approximate rows pinned
  if (full <= seq.num_committed_blocks) return;
  ensure_block_hashes(seq, full);
  std::vector<int> new_indices;      // blocks this sequence computed first: the tier's to write
  std::vector<int32_t> new_blocks;
  for (int i = seq.num_committed_blocks; i < full; ++i) {
    int32_t parent = i == 0 ? RadixTree::kRootParent : seq.block_table[i - 1];
    int32_t own = seq.block_table[i];
    int32_t cached = tree_.insert(parent, seq.block_hashes[i], own);
    if (cached != own) {
      DI_CHECK(pool_.ref(own) == 1, "seq {}: private block {} is shared", seq.id, own);
      if (slabs_.enabled() && i >= seq.recent_from_block) {
        // The sequence still reads this block's recent rows: keep them with the cached twin.
        if (slabs_.slab_of(cached) >= 0) {
          slabs_.pin(cached);
          slabs_.unpin(own, false);
        } else {
          slabs_.move(own, cached);
        }
      }
      acquire(cached);
      release(own);
      seq.block_table[i] = cached;
    } else if (i >= write_from) {
      new_indices.push_back(i);
      new_blocks.push_back(own);
    }
  }
  seq.num_committed_blocks = full;
  if (hook_ != nullptr && !new_indices.empty()) {
    hook_->on_blocks_cached(seq, new_indices, new_blocks);
    stats_.tier_written_blocks += static_cast<int64_t>(new_indices.size());
  }
}

int KvCacheManager::reset_prefix_cache() {
  int n = 0;
  while (auto ev = tree_.evict_lru()) {
    if (hook_ != nullptr) hook_->on_block_evicted(ev->key, ev->block);
    if (slabs_.enabled()) slabs_.detach(ev->block);
    pool_.put_free(ev->block);
    ++n;
  }
  return n;
}

void KvCacheManager::free(Sequence& seq) {
  // A finished sequence's end is where the next turn of its conversation hits.
  if (seq.finish_reason != FinishReason::kNone)
    save_checkpoint(seq, std::min(seq.num_committed_blocks, seq.cache_limit_block));
  if (hook_ != nullptr) hook_->before_sequence_freed(seq);
  if (slabs_.enabled())
    for (size_t i = seq.recent_from_block; i < seq.block_table.size(); ++i)
      slabs_.unpin(seq.block_table[i], tree_.contains(seq.block_table[i]));
  if (seq.tail_from >= 0) {
    // Decoder-side saving: the approximate rows are gone with the pins; the paged state of the
    // computed blocks is exact and enters the cache now.
    seq.recent_from_block = static_cast<int>(seq.block_table.size());
    commit_full_blocks(seq, 0);
  }
  seq.tail_from = -1;
  seq.tail_end = 0;
  seq.recent_from_block = 0;
  seq.replay_start = seq.replay_end = 0;
  seq.cache_limit_block = std::numeric_limits<int>::max();
  // Tail first, so that a prefix's deeper blocks look older than its head to the LRU.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) release(*it);
  seq.block_table.clear();
  seq.num_committed_blocks = 0;
  seq.num_computed_tokens = 0;
  seq.tier_prefetch = TierPrefetch::kNotStarted;
  if (hook_ != nullptr) hook_->on_sequence_released(seq);
}

void KvCacheManager::check_invariants(std::span<const Sequence* const> live) const {
  std::vector<int> expected(num_blocks(), 0);
  std::vector<int> expected_pins(num_blocks(), 0);
  for (const Sequence* s : live) {
    if (slabs_.enabled())
      for (size_t i = s->recent_from_block; i < s->block_table.size(); ++i)
        ++expected_pins[s->block_table[i]];
    DI_CHECK(s->num_committed_blocks <= static_cast<int>(s->block_table.size()), "seq {}", s->id);
    DI_CHECK(s->num_computed_tokens <= static_cast<int>(s->block_table.size()) * block_size(),
             "seq {}: {} computed tokens in {} blocks", s->id, s->num_computed_tokens,
             s->block_table.size());
    for (int32_t b : s->block_table) ++expected[b];
  }
  for (int b = 0; b < num_blocks(); ++b) {
    DI_CHECK(pool_.ref(b) == expected[b], "block {}: refcount {} but {} holders", b, pool_.ref(b),
             expected[b]);
    const bool cached = tree_.contains(b);
    if (expected[b] > 0) {
      DI_CHECK(!pool_.is_free(b), "held block {} is on the free list", b);
      DI_CHECK(!cached || tree_.is_referenced(b), "held block {} is evictable", b);
    } else {
      DI_CHECK(pool_.is_free(b) != cached, "idle block {}: free={} cached={}", b, pool_.is_free(b),
               cached);
      DI_CHECK(!cached || !tree_.is_referenced(b), "idle cached block {} marked referenced", b);
    }
    if (slabs_.enabled()) {
      DI_CHECK(!slabs_.is_evictable(b) || cached, "block {}: evictable slab but not cached", b);
      DI_CHECK(slabs_.slab_of(b) < 0 || cached || expected[b] > 0, "free block {} has a slab", b);
    }
  }
  slabs_.check_invariants(expected_pins);
}

}  // namespace deepinfer::engine
