#include "deepinfer/engine/block_state_copy.h"

#include <cstring>

#include "deepinfer/base/check.h"

namespace deepinfer::engine {

void KvBlockStateCopier::copy_block_state(int32_t from, int32_t to) {
  DI_CHECK(from >= 0 && to >= 0 && from < cache_.num_blocks && to < cache_.num_blocks && from != to,
           "copy of KV block {} to {} ({} blocks)", from, to, cache_.num_blocks);
  for (int l = 0; l < static_cast<int>(cache_.block_state.size()); ++l) {
    const int64_t floats = cache_.spec.block_floats(l, cache_.block_size);
    float* pool = cache_.block_state[l].data();
    std::memcpy(pool + int64_t{to} * floats, pool + int64_t{from} * floats, sizeof(float) * floats);
  }
}

}  // namespace deepinfer::engine
