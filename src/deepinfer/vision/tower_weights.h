// The weights of a SigLIP tower and a LLaVA projector, as the encoder's forward uses them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "deepinfer/model/layers/linear.h"
#include "deepinfer/vision/llava_config.h"

namespace deepinfer::format {
class SafetensorsModel;
}

namespace deepinfer::vision {

struct TowerLayer {
  Tensor ln1_w, ln1_b, ln2_w, ln2_b;  // f32 [hidden]
  model::LinearWeight q, k, v, o, fc1, fc2;  // with f32 biases
};

struct TowerWeights {
  std::vector<float> patch_w;  // [hidden, 3 * patch * patch], (channel, y, x) order
  std::vector<float> patch_b;  // [hidden]
  std::vector<float> pos;      // [num_patches, hidden]
  std::vector<TowerLayer> layers;  // only the layers_to_run() that feed the projector
  model::LinearWeight proj1, proj2;
};

// Loads the weights from `st`, named as any transformers version since 4.40 writes them.
Result<std::unique_ptr<TowerWeights>> load_tower_weights(const format::SafetensorsModel& st, const LlavaConfig& c,
                                                         const std::string& where);

}  // namespace deepinfer::vision
