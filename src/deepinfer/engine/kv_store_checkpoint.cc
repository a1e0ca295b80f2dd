// Sliding-window checkpoints in the KV store (hybrid caches, DeepSeek-V4): a stored block holds
// only its paged state (compressed entries, indexer keys), which grows with the sequence; the
// recent rows (window K/V, compressor tails), 27x larger for V4-Flash, are stored only at the
// ends of cached prefixes, where a later request is likely to hit: the end of a computed prompt
// and of a finished sequence (KvCacheManager decides). A checkpoint is the rows of every block
// a step after that end reads, slab by slab (layer-major within a slab), cut into parts of
// block_bytes() so the store keeps one value size.
#include <algorithm>
#include <cstring>

#include "deepinfer/base/check.h"
#include "deepinfer/engine/kv_store_tier.h"

namespace deepinfer::engine {
namespace {

// Mixed into a checkpoint part's key; a real block key always covers block_size tokens, a
// checkpoint key none, so the two can never collide.
constexpr uint64_t kCheckpointKeyTag = 0x5357412d636b7074ull;  // "SWA-ckpt"

}  // namespace

int KvStoreTier::checkpoint_blocks(int end_blocks) const {
  const int bs = storage_.block_size;
  const int first = std::max(0, end_blocks * bs - storage_.spec.recent_tokens) / bs;
  return end_blocks - first;
}

int KvStoreTier::checkpoint_parts(int num_blocks) const {
  const size_t bytes = size_t(num_blocks) * storage_.bytes_per_recent_slab();
  return static_cast<int>((bytes + block_bytes_ - 1) / block_bytes_);
}

std::vector<kvstore::BlockKey> KvStoreTier::checkpoint_keys(Sequence& seq, int end_blocks) const {
  DI_CHECK(end_blocks > 0, "seq {}: checkpoint of an empty prefix", seq.id);
  ensure_keys(seq, end_blocks);
  const int parts = checkpoint_parts(checkpoint_blocks(end_blocks));
  std::vector<kvstore::BlockKey> keys;
  for (int p = 0; p < parts; ++p) {
    const uint64_t extra[3] = {kCheckpointKeyTag, kSwaCheckpointVersion, uint64_t(p)};
    keys.push_back(kvstore::chain_key(seq.tier_keys[size_t(end_blocks - 1)], {}, extra));
  }
  return keys;
}

void KvStoreTier::pack_checkpoint(std::span<const int32_t> blocks, uint8_t* dst) const {
  for (int32_t block : blocks) {
    const int32_t slab = slabs_->slab_of(block);
    DI_CHECK(slab >= 0, "block {} of a checkpoint has no recent rows", block);
    for (int l = 0; l < storage_.spec.num_layers; ++l) {
      const size_t n = size_t(storage_.block_size) * storage_.spec.recent_row_floats(l);
      std::memcpy(dst, storage_.recent[l].data() + slab * n, n * sizeof(float));
      dst += n * sizeof(float);
    }
  }
}

void KvStoreTier::save_checkpoint(Sequence& seq, int end_blocks, std::span<const int32_t> blocks) {
  if (!storage_.spec.has_recent() || end_blocks <= 0) return;
  const int nb = checkpoint_blocks(end_blocks);
  DI_CHECK(static_cast<int>(blocks.size()) == nb, "seq {}: checkpoint at {} blocks needs {}, got {}",
           seq.id, end_blocks, nb, blocks.size());
  const std::vector<kvstore::BlockKey> keys = checkpoint_keys(seq, end_blocks);
  staging_.assign(keys.size() * block_bytes_, 0);
  pack_checkpoint(blocks, staging_.data());
  std::vector<const uint8_t*> src;
  for (size_t p = 0; p < keys.size(); ++p) src.push_back(staging_.data() + p * block_bytes_);
  const size_t accepted =
      store_->batch_put(keys, src, seq.traffic_class, kvstore::EntryKind::kSwaCheckpoint);
  if (accepted == keys.size()) ++stats_.checkpoints_written;
}

int KvStoreTier::checkpointed_prefix(Sequence& seq, int first, int count, int min_count) {
  if (!storage_.spec.has_recent()) return count;
  for (int m = count; m >= std::max(1, min_count); --m) {
    const std::vector<kvstore::BlockKey> keys = checkpoint_keys(seq, first + m);
    ++stats_.checkpoint_queries;
    if (store_->batch_exists(keys) == keys.size()) return m;
  }
  return 0;
}

bool KvStoreTier::load_checkpoint(Sequence& seq, int end_blocks, std::span<const int32_t> blocks) {
  if (!storage_.spec.has_recent()) return true;
  const int nb = checkpoint_blocks(end_blocks);
  DI_CHECK(static_cast<int>(blocks.size()) == nb, "seq {}: checkpoint at {} blocks has {}, got {}",
           seq.id, end_blocks, nb, blocks.size());
  const std::vector<kvstore::BlockKey> keys = checkpoint_keys(seq, end_blocks);
  staging_.resize(keys.size() * block_bytes_);
  std::vector<uint8_t*> dst;
  for (size_t p = 0; p < keys.size(); ++p) dst.push_back(staging_.data() + p * block_bytes_);
  if (store_->batch_get(keys, dst, seq.traffic_class) < keys.size()) {
    ++stats_.checkpoint_misses;
    return false;
  }
  const uint8_t* src = staging_.data();
  for (int32_t block : blocks) {
    const int32_t slab = block >= 0 ? slabs_->slab_of(block) : -1;
    DI_CHECK(block < 0 || slab >= 0, "seq {}: block {} gets checkpoint rows but has no slab", seq.id,
             block);
    for (int l = 0; l < storage_.spec.num_layers; ++l) {
      const size_t n = size_t(storage_.block_size) * storage_.spec.recent_row_floats(l);
      if (slab >= 0) std::memcpy(storage_.recent[l].data() + slab * n, src, n * sizeof(float));
      src += n * sizeof(float);
    }
  }
  ++stats_.checkpoints_loaded;
  return true;
}

int KvStoreTier::export_checkpoint(Sequence& seq, int first_index) {
  if (!storage_.spec.has_recent() || first_index <= 0) return 0;
  // A decoder-side saving left approximate rows (Sequence::tail_from): none is an exact
  // checkpoint, and the decode engine keys what it gets as one.
  if (seq.tail_from >= 0) return 0;
  // The end a decode engine's hit reaches: the last full block before the prompt's last token.
  const int end = std::min(first_index, (seq.num_prompt_tokens() - 1) / storage_.block_size);
  if (end <= 0) return 0;
  const int nb = checkpoint_blocks(end);
  for (int j = end - nb; j < end; ++j)
    if (slabs_->slab_of(seq.block_table[size_t(j)]) < 0) return 0;  // rows gone: none to send
  const std::vector<kvstore::BlockKey> keys = checkpoint_keys(seq, end);
  std::vector<int32_t> blocks(seq.block_table.begin() + (end - nb), seq.block_table.begin() + end);
  std::vector<uint8_t> bytes(keys.size() * block_bytes_, 0);
  pack_checkpoint(blocks, bytes.data());
  for (size_t p = 0; p < keys.size(); ++p)
    export_sink_->export_block(seq.kv_export_tag, first_index + static_cast<int>(p), keys[p],
                               std::span<const uint8_t>(bytes.data() + p * block_bytes_, block_bytes_),
                               kvstore::EntryKind::kSwaCheckpoint);
  return static_cast<int>(keys.size());
}

}  // namespace deepinfer::engine
