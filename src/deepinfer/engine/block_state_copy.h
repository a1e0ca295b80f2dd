// Copies blocks' paged state inside the runner's KV pools (hybrid caches): the private copies a
// bounded replay makes of a cached prefix's last blocks (kv_cache_manager.h).
#pragma once

#include <cstdint>

#include "deepinfer/engine/kv_cache_manager.h"
#include "deepinfer/model/kv_cache.h"

namespace deepinfer::engine {

class KvBlockStateCopier final : public BlockStateCopier {
 public:
  explicit KvBlockStateCopier(model::KvCache& cache) : cache_(cache) {}
  // Every layer's paged kinds of `from` into `to`; recent rows (slabs) are not touched.
  void copy_block_state(int32_t from, int32_t to) override;

 private:
  model::KvCache& cache_;
};

}  // namespace deepinfer::engine
