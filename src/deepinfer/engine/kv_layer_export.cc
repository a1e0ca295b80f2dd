#include "deepinfer/engine/kv_layer_export.h"

#include <cstring>
#include <memory>

namespace deepinfer::engine {

bool can_export_by_layer(const model::KvCache& storage) {
  return !storage.spec.hybrid() && storage.spec.num_layers > 0;
}

size_t layer_slice_bytes(const model::KvCache& storage) {
  const size_t eb = storage.spec.kv_elem_bytes();
  return size_t(storage.block_size) * size_t(storage.k_token_stride() + storage.v_token_stride()) * eb;
}

std::function<void(int layer)> make_layer_exporter(const model::KvCache& storage, KvExportSink& sink,
                                                   std::vector<LayerExportPlan> plans) {
  struct State {
    const model::KvCache* storage;
    KvExportSink* sink;
    std::vector<LayerExportPlan> plans;
    std::vector<uint8_t> staging;
  };
  auto state = std::make_shared<State>(State{&storage, &sink, std::move(plans), {}});
  return [state](int layer) {
    const model::KvCache& kv = *state->storage;
    const size_t eb = kv.spec.kv_elem_bytes();
    const size_t k_bytes = size_t(kv.block_size) * size_t(kv.k_token_stride()) * eb;
    const size_t v_bytes = size_t(kv.block_size) * size_t(kv.v_token_stride()) * eb;
    const size_t slice = k_bytes + v_bytes;
    for (const LayerExportPlan& plan : state->plans) {
      state->staging.resize(plan.blocks.size() * slice);
      uint8_t* dst = state->staging.data();
      for (int32_t block : plan.blocks) {  // the same bytes KvStoreTier::gather puts at this layer
        std::memcpy(dst, kv.k[size_t(layer)].data() + size_t(block) * k_bytes, k_bytes);
        if (v_bytes > 0) std::memcpy(dst + k_bytes, kv.v[size_t(layer)].data() + size_t(block) * v_bytes, v_bytes);
        dst += slice;
      }
      state->sink->export_layer(plan.tag, layer, kv.spec.num_layers, plan.keys, state->staging);
    }
  };
}

}  // namespace deepinfer::engine
