// Layer-by-layer export of a prefill engine's prompt blocks (prefill/decode disaggregation,
// kv_export.h): in the step that completes a prompt, after each layer of the forward the
// layer's K/V slice of every full prompt block goes to the KvExportSink, so the KV transfer of
// the first layers runs while the last ones are still being computed.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deepinfer/engine/kv_export.h"
#include "deepinfer/model/kv_cache.h"

namespace deepinfer::engine {

// One sequence's export in one step: the full prompt blocks, in order.
struct LayerExportPlan {
  std::string tag;                              // GenerationRequest::kv_export_tag
  std::vector<std::array<uint8_t, 32>> keys;    // [n] their KV store keys
  std::vector<int32_t> blocks;                  // [n] their physical KV blocks
};

// Whether a cache's blocks can be sent by layer: not hybrid, and every layer's [K, V] slice of
// a block the same size (so slice l sits at l * layer bytes of the KvStoreTier block layout).
bool can_export_by_layer(const model::KvCache& storage);
// Bytes of one layer's slice of one block (K then V; MLA caches have no V).
size_t layer_slice_bytes(const model::KvCache& storage);

// The callable a step's forward runs after each layer (model::ForwardContext::after_layer):
// copies layer l of every planned block out of `storage` and hands it to `sink`. The storage
// and sink must outlive the step.
std::function<void(int layer)> make_layer_exporter(const model::KvCache& storage, KvExportSink& sink,
                                                   std::vector<LayerExportPlan> plans);

}  // namespace deepinfer::engine
