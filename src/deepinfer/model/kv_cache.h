// Paged KV storage that models write into during forward(): its per-layer shape (what a model
// asks for) and the pools themselves (what the engine allocates and hands to every step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "deepinfer/base/aligned_buffer.h"

namespace deepinfer::model {

// Shape of the per-token KV state of one layer.
struct KvCacheSpec {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;    // K channels per head
  int v_head_dim = 0;  // V channels per head
};

// Paged KV storage: for each layer, K and V pools laid out [num_blocks, block_size, kv_heads,
// head_dim] in f32. Block ids come from the engine's block manager.
struct KvCache {
  KvCacheSpec spec;
  int num_blocks = 0;
  int block_size = 0;
  std::vector<AlignedBuffer<float>> k;  // [num_layers]
  std::vector<AlignedBuffer<float>> v;  // [num_layers]

  static KvCache allocate(const KvCacheSpec& spec, int num_blocks, int block_size);
  size_t bytes_per_block() const;
  int64_t k_token_stride() const { return int64_t{spec.num_kv_heads} * spec.head_dim; }
  int64_t v_token_stride() const { return int64_t{spec.num_kv_heads} * spec.v_head_dim; }
};

}  // namespace deepinfer::model
