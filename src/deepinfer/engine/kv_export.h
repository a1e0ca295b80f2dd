// Where a prefill engine's computed prompt blocks go in a disaggregated deployment: the engine
// (through its KV store tier, which names blocks by their store keys) hands the full prompt
// blocks of a request that carries GenerationRequest::kv_export_tag to this sink: layer by
// layer while the forward that completes the prompt runs (export_layer), or, where the cache
// cannot be cut by layer, each whole block on the engine thread just before the sequence's
// blocks are released (export_block). The decode engine that receives them
// puts them in its own KV store RAM tier (KvStoreTier::import_block), where its admission finds
// them as a prefix hit.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "deepinfer/kvstore/shard_format.h"

namespace deepinfer::engine {

class KvExportSink {
 public:
  virtual ~KvExportSink() = default;
  // Block `index` of the prompt (0 = first), its store key and its bytes (KvStoreTier layout).
  // Called in order; the bytes are only valid during the call. `kind`: a KV block, or (hybrid
  // caches, after the blocks) a part of the prompt's sliding-window checkpoint, which the
  // receiving store keeps as such (counted apart, queued for its SSD all or none).
  virtual void export_block(const std::string& tag, int index, const std::array<uint8_t, 32>& key,
                            std::span<const uint8_t> bytes, kvstore::EntryKind kind) = 0;
  // Layer by layer (caches whose blocks are one [K, V] slice per layer, every layer the same
  // size; not hybrid caches): during the forward that finishes the prompt, right after layer
  // `layer` of `num_layers` wrote its K/V, that layer's slice of every full prompt block, in
  // block order: `keys` [n] and `bytes` [n * layer bytes], the slices back to back (block i's
  // slice is its KvStoreTier bytes at [layer * layer bytes, (layer + 1) * layer bytes)). Called
  // on the forward's thread, once per layer in order; the bytes are only valid during the
  // call. A tag exported this way gets no export_block calls, only export_done.
  virtual void export_layer(const std::string& tag, int layer, int num_layers,
                            std::span<const std::array<uint8_t, 32>> keys, std::span<const uint8_t> bytes) = 0;
  // Every block of the tag was handed over (`blocks` of them; 0 when the prompt has no full
  // block or the request ended before its prompt was computed).
  virtual void export_done(const std::string& tag, int blocks) = 0;
};

}  // namespace deepinfer::engine
