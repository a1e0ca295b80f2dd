// How the engine splits its KV memory budget for a model's cache spec: the block size (rounded
// up to what the architecture needs), the number of blocks, and for hybrid caches the number of
// recent slabs (enough for one step's new tokens plus every running sequence's recent tokens,
// twice over for overlap scheduling, taken first so that long contexts page only what grows).
#pragma once

#include <cstddef>

#include "deepinfer/model/kv_cache.h"

namespace deepinfer::engine {

struct KvCachePlanInput {
  size_t kv_cache_bytes = 0;
  int block_size = 16;
  int max_num_seqs = 1;
  int max_num_batched_tokens = 512;
};

struct KvCachePlan {
  int block_size = 16;
  int num_blocks = 0;
  int num_recent_slabs = 0;
  size_t block_bytes = 0;  // per block (K/V or paged state)
  size_t slab_bytes = 0;   // per recent slab
};

KvCachePlan plan_kv_cache(const model::KvCacheSpec& spec, const KvCachePlanInput& in);

}  // namespace deepinfer::engine
