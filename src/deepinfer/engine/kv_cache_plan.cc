// The split: recent slabs first (bounded by half the budget, never below what one step needs),
// then blocks from the rest (at least 16, as before).
#include "deepinfer/engine/kv_cache_plan.h"

#include <algorithm>

namespace deepinfer::engine {

KvCachePlan plan_kv_cache(const model::KvCacheSpec& spec, const KvCachePlanInput& in) {
  KvCachePlan p;
  const int multiple = std::max(1, spec.block_size_multiple);
  p.block_size = (in.block_size + multiple - 1) / multiple * multiple;
  p.block_bytes = model::KvCache::bytes_per_block(spec, p.block_size);
  p.slab_bytes = model::KvCache::bytes_per_recent_slab(spec, p.block_size);
  const size_t block_bytes = std::max<size_t>(p.block_bytes, 1);
  if (p.slab_bytes == 0) {
    p.num_blocks = static_cast<int>(std::max<size_t>(in.kv_cache_bytes / block_bytes, 16));
    return p;
  }
  const int bs = p.block_size, R = spec.recent_tokens;
  // One admission at most (KvCacheManager::allocate_slots): the new tokens' blocks and the
  // recent tokens before them, and again the new tokens' for a failed tier load.
  const int one_step = (2 * in.max_num_batched_tokens + R + bs - 1) / bs + 3;
  const int wanted =
      (2 * in.max_num_batched_tokens + in.max_num_seqs * R + bs - 1) / bs + 3 * in.max_num_seqs;
  const size_t affordable = in.kv_cache_bytes / 2 / p.slab_bytes;
  int slabs = std::max(one_step, static_cast<int>(std::min<size_t>(wanted, affordable)));
  const size_t slab_total = size_t(slabs) * p.slab_bytes;
  const size_t rest = in.kv_cache_bytes > slab_total ? in.kv_cache_bytes - slab_total : 0;
  p.num_blocks = static_cast<int>(std::max<size_t>(rest / block_bytes, 16));
  p.num_recent_slabs = std::min(slabs, p.num_blocks);
  return p;
}

}  // namespace deepinfer::engine
