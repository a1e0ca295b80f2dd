// Block accounting for sequences. Ordering matters in allocate_slots: prefix blocks are
// acquired before fresh blocks are taken, so an eviction can never take a block just matched.
#include "deepinfer/engine/kv_cache_manager.h"

#include <algorithm>

#include "deepinfer/base/check.h"

namespace deepinfer::engine {

Status validate(const KvCacheConfig& config) {
  if (config.block_size <= 0 || config.block_size > 4096)
    return invalid_argument("kv cache block_size {} must be in [1, 4096]", config.block_size);
  if (config.num_blocks <= 0)
    return invalid_argument("kv cache num_blocks {} must be positive", config.num_blocks);
  return Status::ok();
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config, KvTierHook* hook)
    : config_(config),
      hook_(hook),
      pool_(config.num_blocks, config.block_size),
      root_hash_(root_block_hash(config.cache_namespace)) {}

void KvCacheManager::ensure_block_hashes(Sequence& seq, int num_full_blocks) const {
  const int bs = block_size();
  DI_CHECK(num_full_blocks * bs <= seq.num_tokens(), "seq {}: {} full blocks of {} tokens",
           seq.id, num_full_blocks, seq.num_tokens());
  std::vector<int32_t> tokens(bs);
  for (int i = static_cast<int>(seq.block_hashes.size()); i < num_full_blocks; ++i) {
    for (int t = 0; t < bs; ++t) tokens[t] = seq.token_at(i * bs + t);
    const BlockHash& parent = i == 0 ? root_hash_ : seq.block_hashes[i - 1];
    seq.block_hashes.push_back(chain_block_hash(parent, tokens));
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
  ensure_block_hashes(seq, max_blocks);
  std::span<const BlockHash> keys(seq.block_hashes.data(), max_blocks);
  match.blocks = tree_.match(keys);
  if (hook_ != nullptr && !seq.skip_tier && static_cast<int>(match.blocks.size()) < max_blocks) {
    const int first = static_cast<int>(match.blocks.size());
    int n = hook_->lookup_prefix(seq, first, max_blocks - first);
    match.num_tier_blocks = std::clamp(n, 0, max_blocks - static_cast<int>(match.blocks.size()));
  }
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
    if (max_blocks > 0) {
      ensure_block_hashes(seq, max_blocks);
      in_memory = static_cast<int>(
          tree_.match(std::span<const BlockHash>(seq.block_hashes.data(), max_blocks)).size());
    }
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
    pool_.put_free(block);
  }
}

std::optional<int> KvCacheManager::allocate_slots(Sequence& seq, int num_new_tokens,
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
    for (int32_t b : prefix->blocks) reusable_unreferenced += pool_.ref(b) == 0 ? 1 : 0;
  }
  const int computed = seq.num_computed_tokens + (num_prefix + num_tier) * bs;
  const int total_tokens = computed + num_new_tokens;
  const int blocks_needed = (total_tokens + bs - 1) / bs;
  const int held = static_cast<int>(seq.block_table.size()) + num_prefix;
  const int num_fresh = std::max(0, blocks_needed - held);
  if (num_fresh > num_available_blocks() - reusable_unreferenced) return std::nullopt;

  // Commit.
  if (prefix != nullptr) {
    for (int32_t b : prefix->blocks) {
      acquire(b);
      seq.block_table.push_back(b);
    }
    seq.num_committed_blocks = num_prefix;
  }
  for (int i = 0; i < num_fresh; ++i) seq.block_table.push_back(take_block());
  if (prefix != nullptr) {
    int loaded = 0;
    if (num_tier > 0) {
      std::span<const int32_t> dst(seq.block_table.data() + num_prefix, num_tier);
      loaded = std::clamp(hook_->load_blocks(seq, num_prefix, dst), 0, num_tier);
    }
    seq.num_computed_tokens = (num_prefix + loaded) * bs;
    commit_full_blocks(seq, num_prefix + loaded);  // loaded blocks are full and computed
    ++stats_.admissions;
    stats_.admitted_tokens += seq.num_tokens();
    stats_.hit_tokens += seq.num_computed_tokens;
    stats_.memory_hit_tokens += int64_t{num_prefix} * bs;
    stats_.tier_hit_tokens += int64_t{loaded} * bs;
    stats_.tier_loaded_blocks += loaded;
  }
  return num_fresh;
}

void KvCacheManager::cache_full_blocks(Sequence& seq) { commit_full_blocks(seq, 0); }

void KvCacheManager::commit_full_blocks(Sequence& seq, int write_from) {
  if (!config_.enable_prefix_caching) return;
  const int full = std::min(seq.num_computed_tokens / block_size(),
                            static_cast<int>(seq.block_table.size()));
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
    pool_.put_free(ev->block);
    ++n;
  }
  return n;
}

void KvCacheManager::free(Sequence& seq) {
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
  for (const Sequence* s : live) {
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
  }
}

}  // namespace deepinfer::engine
