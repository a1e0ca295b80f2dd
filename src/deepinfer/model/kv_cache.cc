// KvCache allocation: one K and one V pool per layer, zero-filled by AlignedBuffer.
#include "deepinfer/model/kv_cache.h"

namespace deepinfer::model {

KvCache KvCache::allocate(const KvCacheSpec& spec, int num_blocks, int block_size) {
  KvCache c;
  c.spec = spec;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  const size_t per_layer_k = size_t(num_blocks) * block_size * spec.num_kv_heads * spec.head_dim;
  const size_t per_layer_v = size_t(num_blocks) * block_size * spec.num_kv_heads * spec.v_head_dim;
  c.k.resize(spec.num_layers);
  c.v.resize(spec.num_layers);
  for (int l = 0; l < spec.num_layers; ++l) {
    c.k[l].resize(per_layer_k);
    c.v[l].resize(per_layer_v);
  }
  return c;
}

size_t KvCache::bytes_per_block() const {
  return size_t(block_size) * spec.num_layers * spec.num_kv_heads * (spec.head_dim + spec.v_head_dim) *
         sizeof(float);
}

}  // namespace deepinfer::model
