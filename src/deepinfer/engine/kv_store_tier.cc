// KvStoreTier: gathers a block's K/V from every layer into one contiguous value (layer-major:
// L0 K, L0 V, L1 K, ...; hybrid caches: L0 paged state, L1 paged state, ...; their recent rows
// go to checkpoints, kv_store_checkpoint.cc) for the store, and scatters it back. Staging goes in bounded chunks so a
// long prefix never needs a prefix-sized buffer.
#include "deepinfer/engine/kv_store_tier.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "deepinfer/base/check.h"
#include "deepinfer/engine/image_block_keys.h"
#include "deepinfer/engine/kv_layer_export.h"

namespace deepinfer::engine {
namespace {

constexpr size_t kStagingBytes = size_t{64} << 20;

}  // namespace

KvStoreTier::KvStoreTier(std::unique_ptr<kvstore::KvStore> store, const kvstore::Namespace& ns,
                         model::KvCache& storage, std::chrono::milliseconds prefetch_timeout)
    : store_(std::move(store)),
      ns_(ns),
      root_(kvstore::root_key(ns)),
      storage_(storage),
      block_bytes_(storage.bytes_per_block()),
      prefetch_timeout_(prefetch_timeout) {
  DI_CHECK(store_->config().block_bytes == block_bytes_, "store block_bytes {} != KV block {}",
           store_->config().block_bytes, block_bytes_);
}

bool KvStoreTier::gather(int32_t block, uint8_t* dst) const {
  DI_CHECK(block >= 0 && block < storage_.num_blocks, "block {} of {}", block, storage_.num_blocks);
  const model::KvCacheSpec& spec = storage_.spec;
  if (spec.hybrid()) {  // the paged state only: recent rows travel as checkpoints
    for (int l = 0; l < spec.num_layers; ++l) {
      const size_t n = size_t(spec.block_floats(l, storage_.block_size));
      std::memcpy(dst, storage_.block_state[l].data() + block * n, n * sizeof(float));
      dst += n * sizeof(float);
    }
    return true;
  }
  // The pools' bytes as they are (f32, f16 or bf16: the namespace names the dtype).
  const size_t eb = spec.kv_elem_bytes();
  const size_t k_bytes = size_t(storage_.block_size) * storage_.k_token_stride() * eb;
  const size_t v_bytes = size_t(storage_.block_size) * storage_.v_token_stride() * eb;
  for (int l = 0; l < spec.num_layers; ++l) {
    std::memcpy(dst, storage_.k[l].data() + block * k_bytes, k_bytes);
    dst += k_bytes;
    if (v_bytes == 0) continue;  // MLA caches have no V pool (null data)
    std::memcpy(dst, storage_.v[l].data() + block * v_bytes, v_bytes);
    dst += v_bytes;
  }
  return true;
}

void KvStoreTier::scatter(const uint8_t* src, int32_t block) {
  DI_CHECK(block >= 0 && block < storage_.num_blocks, "block {} of {}", block, storage_.num_blocks);
  const model::KvCacheSpec& spec = storage_.spec;
  if (spec.hybrid()) {
    for (int l = 0; l < spec.num_layers; ++l) {
      const size_t n = size_t(spec.block_floats(l, storage_.block_size));
      std::memcpy(storage_.block_state[l].data() + block * n, src, n * sizeof(float));
      src += n * sizeof(float);
    }
    return;
  }
  const size_t eb = spec.kv_elem_bytes();
  const size_t k_bytes = size_t(storage_.block_size) * storage_.k_token_stride() * eb;
  const size_t v_bytes = size_t(storage_.block_size) * storage_.v_token_stride() * eb;
  for (int l = 0; l < spec.num_layers; ++l) {
    std::memcpy(storage_.k[l].data() + block * k_bytes, src, k_bytes);
    src += k_bytes;
    if (v_bytes == 0) continue;
    std::memcpy(storage_.v[l].data() + block * v_bytes, src, v_bytes);
    src += v_bytes;
  }
}

void KvStoreTier::ensure_keys(Sequence& seq, int n) const {
  const int bs = storage_.block_size;
  DI_CHECK(n * bs <= seq.num_tokens(), "seq {}: {} full blocks of {} tokens", seq.id, n,
           seq.num_tokens());
  std::vector<int32_t> tokens(bs);
  for (int i = static_cast<int>(seq.tier_keys.size()); i < n; ++i) {
    for (int t = 0; t < bs; ++t) tokens[t] = seq.token_at(i * bs + t);
    seq.tier_keys.push_back(kvstore::chain_key(i == 0 ? root_ : seq.tier_keys[i - 1], tokens,
                                               image_block_extra(seq, i * bs, bs)));
  }
}

int KvStoreTier::lookup_prefix(Sequence& seq, int first, int count) {
  ++stats_.lookups;
  if (count <= 0) return 0;
  ensure_keys(seq, first + count);
  const std::span<const kvstore::BlockKey> keys(seq.tier_keys.data() + first, count);
  size_t n = 0;
  if (auto it = prefetched_.find(seq.id); it != prefetched_.end()) {
    // After a prefetch only its blocks count, and only while still in RAM: no storage I/O here.
    const Prefetched& p = it->second;
    if (first >= p.first && first < p.end)
      n = store_->host_prefix_length(keys.first(std::min(count, p.end - first)));
  } else {
    n = store_->batch_exists(keys);
  }
  stats_.offered_blocks += static_cast<int64_t>(n);
  return static_cast<int>(n);
}

int KvStoreTier::load_blocks(Sequence& seq, int first, std::span<const int32_t> blocks) {
  const int total = static_cast<int>(blocks.size());
  if (total == 0) return 0;
  ensure_keys(seq, first + total);
  const int chunk = static_cast<int>(std::max<size_t>(1, kStagingBytes / block_bytes_));
  int loaded = 0;
  while (loaded < total) {
    const int n = std::min(chunk, total - loaded);
    staging_.resize(size_t(n) * block_bytes_);
    std::vector<uint8_t*> dst(n);
    for (int i = 0; i < n; ++i) dst[i] = staging_.data() + size_t(i) * block_bytes_;
    const size_t got = store_->batch_get(
        std::span<const kvstore::BlockKey>(seq.tier_keys.data() + first + loaded, n), dst,
        seq.traffic_class);
    for (size_t i = 0; i < got; ++i) scatter(dst[i], blocks[loaded + i]);
    loaded += static_cast<int>(got);
    if (static_cast<int>(got) < n) break;
  }
  stats_.loaded_blocks += loaded;
  stats_.load_misses += total - loaded;
  return loaded;
}

bool KvStoreTier::start_prefetch(Sequence& seq, int first, int count) {
  // Past half the host tier, prefetched blocks would start evicting each other (and everyone
  // else's); admission reads the rest itself.
  const size_t cap = store_->config().host_tier_bytes / 2 / block_bytes_;
  count = std::min(count, static_cast<int>(std::min<size_t>(cap, INT32_MAX)));
  if (count <= 0) return true;
  ensure_keys(seq, first + count);
  std::vector<kvstore::BlockKey> keys(seq.tier_keys.begin() + first,
                                      seq.tier_keys.begin() + first + count);
  ++stats_.prefetches;
  std::future<size_t> f = store_->prefetch(std::move(keys), seq.traffic_class);
  if (f.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    const int got = static_cast<int>(f.get());
    stats_.prefetched_blocks += got;
    prefetched_[seq.id] = Prefetched{first, first + got};
    return true;
  }
  prefetches_[seq.id] = Prefetch{std::move(f), std::chrono::steady_clock::now(), first};
  return false;
}

bool KvStoreTier::prefetch_done(Sequence& seq) {
  auto it = prefetches_.find(seq.id);
  if (it == prefetches_.end()) return true;
  if (it->second.done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    if (std::chrono::steady_clock::now() - it->second.started < prefetch_timeout_) return false;
    // The read is abandoned (it finishes on the reader thread whenever storage answers).
    ++stats_.prefetch_timeouts;
    seq.skip_tier = true;
    prefetches_.erase(it);
    return true;
  }
  const int got = static_cast<int>(it->second.done.get());
  stats_.prefetched_blocks += got;
  prefetched_[seq.id] = Prefetched{it->second.first, it->second.first + got};
  prefetches_.erase(it);
  return true;
}

void KvStoreTier::on_sequence_released(const Sequence& seq) {
  // An abandoned read still completes on the reader thread (its blocks stay in the host tier);
  // the future does not block on destruction (it comes from a packaged_task).
  prefetches_.erase(seq.id);
  prefetched_.erase(seq.id);
}

void KvStoreTier::wait_for_prefetch(std::chrono::milliseconds timeout) {
  if (prefetches_.empty()) return;
  prefetches_.begin()->second.done.wait_for(timeout);
}

int KvStoreTier::exportable_blocks(const Sequence& seq) const {
  return std::min({seq.num_prompt_tokens() / storage_.block_size, static_cast<int>(seq.block_table.size()), seq.cache_limit_block});
}

std::function<void(int)> KvStoreTier::layer_exporter(const std::vector<Sequence*>& completing) {
  if (export_sink_ == nullptr || !export_by_layer_ || !can_export_by_layer(storage_)) return nullptr;
  std::vector<LayerExportPlan> plans;
  for (Sequence* seq : completing) {
    if (seq->kv_export_tag.empty() || seq->kv_exported || seq->kv_layer_exported_blocks >= 0) continue;
    const int n = exportable_blocks(*seq);
    ensure_keys(*seq, n);
    LayerExportPlan plan{seq->kv_export_tag, {}, {}};
    plan.keys.assign(seq->tier_keys.begin(), seq->tier_keys.begin() + n);
    plan.blocks.assign(seq->block_table.begin(), seq->block_table.begin() + n);
    seq->kv_layer_exported_blocks = n;
    if (n > 0) plans.push_back(std::move(plan));
  }
  if (plans.empty()) return nullptr;
  return make_layer_exporter(storage_, *export_sink_, std::move(plans));
}

void KvStoreTier::before_sequence_freed(Sequence& seq) {
  if (export_sink_ == nullptr || seq.kv_export_tag.empty() || seq.kv_exported) return;
  const bool finishing = seq.finish_reason != FinishReason::kNone;  // else a preemption
  if (seq.num_computed_tokens < seq.num_prompt_tokens() && !finishing) return;  // export later
  seq.kv_exported = true;
  if (seq.kv_layer_exported_blocks >= 0) {  // sent during the forward that completed the prompt
    export_sink_->export_done(seq.kv_export_tag, seq.kv_layer_exported_blocks);
    return;
  }
  int sent = 0;
  if (seq.num_computed_tokens >= seq.num_prompt_tokens()) {
    const int n = exportable_blocks(seq);
    ensure_keys(seq, n);
    staging_.resize(block_bytes_);
    for (; sent < n; ++sent) {
      if (!gather(seq.block_table[size_t(sent)], staging_.data())) break;
      export_sink_->export_block(seq.kv_export_tag, sent, seq.tier_keys[size_t(sent)],
                                 std::span<const uint8_t>(staging_.data(), block_bytes_),
                                 kvstore::EntryKind::kKvBlock);
    }
    if (sent == n) sent += export_checkpoint(seq, sent);
  }
  export_sink_->export_done(seq.kv_export_tag, sent);
}

bool KvStoreTier::import_block(const kvstore::BlockKey& key, std::span<const uint8_t> bytes,
                               kvstore::EntryKind kind) {
  if (bytes.size() != block_bytes_) return false;
  const uint8_t* src = bytes.data();
  return store_->batch_put(std::span<const kvstore::BlockKey>(&key, 1),
                           std::span<const uint8_t* const>(&src, 1), kvstore::TrafficClass::kChat,
                           kind) == 1;
}

void KvStoreTier::on_blocks_cached(Sequence& seq, std::span<const int> indices,
                                   std::span<const int32_t> blocks) {
  DI_CHECK(indices.size() == blocks.size(), "{} indices for {} blocks", indices.size(),
           blocks.size());
  if (indices.empty()) return;
  ensure_keys(seq, *std::max_element(indices.begin(), indices.end()) + 1);
  const size_t chunk = std::max<size_t>(1, kStagingBytes / block_bytes_);
  for (size_t done = 0; done < indices.size();) {
    const size_t n = std::min(chunk, indices.size() - done);
    staging_.resize(n * block_bytes_);
    std::vector<kvstore::BlockKey> keys;
    std::vector<const uint8_t*> src;
    for (size_t i = 0; i < n; ++i) {
      uint8_t* at = staging_.data() + keys.size() * block_bytes_;
      if (!gather(blocks[done + i], at)) continue;  // its recent rows are gone: not storable
      keys.push_back(seq.tier_keys[indices[done + i]]);
      src.push_back(at);
    }
    done += n;
    if (keys.empty()) continue;
    const size_t accepted = store_->batch_put(keys, src, seq.traffic_class);  // copies; never blocks
    stats_.written_blocks += static_cast<int64_t>(accepted);
    stats_.write_rejects += static_cast<int64_t>(keys.size() - accepted);
  }
}

Result<std::unique_ptr<KvStoreTier>> make_kv_store_tier(const KvStoreTierOptions& opts,
                                                        model::KvCache& storage) {
  if (opts.model_namespace.empty())
    return invalid_argument("kv store tier: model_namespace is empty (blocks need an owner)");
  if (storage.num_blocks <= 0 || storage.block_size <= 0 || storage.bytes_per_block() == 0)
    return invalid_argument("kv store tier: KV storage has no blocks ({} blocks of {} tokens)",
                            storage.num_blocks, storage.block_size);
  kvstore::Namespace ns;
  ns.model_id = opts.model_namespace;
  // Shapes go into the revision so that a differently built cache can never read these bytes.
  const model::KvCacheSpec& s = storage.spec;
  ns.revision = fmt::format("layers={},kv_heads={},k_dim={},v_dim={},compute={}", s.num_layers,
                            s.num_kv_heads, s.head_dim, s.v_head_dim, opts.compute_settings);
  if (s.hybrid())
    ns.revision += fmt::format(
        ",hybrid_block_bytes={},recent_slab_bytes={},recent_tokens={},swa_checkpoints={}",
        storage.bytes_per_block(), storage.bytes_per_recent_slab(), s.recent_tokens,
        kSwaCheckpointVersion);
  ns.kv_layout_version = kKvStoreLayoutVersion;
  // An f32 block is never served to a 16-bit cache, nor the other way round (hybrid state is
  // f32 only, so its dtype is the cache's).
  ns.dtype = std::string(dtype_name(s.dtype));
  ns.block_tokens = static_cast<uint32_t>(storage.block_size);

  kvstore::KvStoreConfig cfg = opts.store_overrides;
  cfg.targets = opts.dirs;
  cfg.block_bytes = storage.bytes_per_block();
  cfg.host_tier_bytes = opts.host_tier_bytes;
  DI_ASSIGN_OR_RETURN(std::unique_ptr<kvstore::KvStore> store, kvstore::KvStore::open(cfg));
  return std::make_unique<KvStoreTier>(std::move(store), ns, storage, opts.prefetch_timeout);
}

}  // namespace deepinfer::engine
