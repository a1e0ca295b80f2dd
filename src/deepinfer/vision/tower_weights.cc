// Loading of the SigLIP tower and projector weights by their Hugging Face names.
#include "deepinfer/vision/tower_weights.h"

#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/weight_map.h"

namespace deepinfer::vision {
namespace {

// Where the tower and projector live: transformers < 4.52 writes vision_tower.vision_model.* and
// multi_modal_projector.*, 4.52-4.57 put both under model.*, 5.x writes vision_tower.* directly.
class Names {
 public:
  Names(const format::SafetensorsModel& st, std::string where) : st_(st), where_(std::move(where)) {
    for (const char* p : {"vision_tower.vision_model.", "model.vision_tower.vision_model.", "vision_tower.",
                          "model.vision_tower."}) {
      if (st_.find(std::string(p) + "embeddings.patch_embedding.weight") != nullptr) {
        tower_ = p;
        break;
      }
    }
    if (st_.find("model.multi_modal_projector.linear_1.weight") != nullptr) proj_ = "model.";
  }
  const std::string& tower() const { return tower_; }
  const std::string& projector() const { return proj_; }
  Result<Tensor> get(const std::string& name, std::vector<int64_t> shape) const {
    const std::string& full = name;
    const Tensor* t = st_.find(full);
    if (t == nullptr) return not_found("{}: missing tensor '{}'", where_, full);
    DI_RETURN_IF_ERROR(model::check_shape(*t, shape, where_, full));
    return *t;
  }
  Result<Tensor> get_f32(const std::string& name, std::vector<int64_t> shape) const {
    DI_ASSIGN_OR_RETURN(Tensor t, get(name, shape));
    return model::to_f32(t, name);
  }
  Result<std::vector<float>> vec(const std::string& name, std::vector<int64_t> shape) const {
    DI_ASSIGN_OR_RETURN(Tensor t, get_f32(name, shape));
    const float* p = static_cast<const float*>(t.data);
    return std::vector<float>(p, p + t.numel());
  }
  Result<model::LinearWeight> linear(const std::string& name, int64_t n_out, int64_t n_in, bool bias) const {
    model::LinearWeight w;
    DI_ASSIGN_OR_RETURN(w.weight, get(name + ".weight", {n_out, n_in}));
    if (bias) {
      DI_ASSIGN_OR_RETURN(w.bias, get_f32(name + ".bias", {n_out}));
    }
    return w;
  }

 private:
  const format::SafetensorsModel& st_;
  std::string where_;
  std::string tower_ = "vision_tower.vision_model.";
  std::string proj_;
};

}  // namespace

Result<std::unique_ptr<TowerWeights>> load_tower_weights(const format::SafetensorsModel& st, const LlavaConfig& c,
                                                         const std::string& where) {
  const Names n(st, where);
  const VisionTowerConfig& t = c.tower;
  const int64_t H = t.hidden_size, F = t.intermediate_size, P = t.patch_size, T = c.text_hidden_size;
  auto w = std::make_unique<TowerWeights>();
  const std::string emb = n.tower() + "embeddings.";
  DI_ASSIGN_OR_RETURN(w->patch_w, n.vec(emb + "patch_embedding.weight", {H, 3, P, P}));
  DI_ASSIGN_OR_RETURN(w->patch_b, n.vec(emb + "patch_embedding.bias", {H}));
  DI_ASSIGN_OR_RETURN(w->pos, n.vec(emb + "position_embedding.weight", {t.num_patches(), H}));
  w->layers.resize(static_cast<size_t>(c.layers_to_run()));
  for (int l = 0; l < c.layers_to_run(); ++l) {
    TowerLayer& L = w->layers[l];
    const std::string p = n.tower() + "encoder.layers." + std::to_string(l) + ".";
    DI_ASSIGN_OR_RETURN(L.ln1_w, n.get_f32(p + "layer_norm1.weight", {H}));
    DI_ASSIGN_OR_RETURN(L.ln1_b, n.get_f32(p + "layer_norm1.bias", {H}));
    DI_ASSIGN_OR_RETURN(L.ln2_w, n.get_f32(p + "layer_norm2.weight", {H}));
    DI_ASSIGN_OR_RETURN(L.ln2_b, n.get_f32(p + "layer_norm2.bias", {H}));
    DI_ASSIGN_OR_RETURN(L.q, n.linear(p + "self_attn.q_proj", H, H, true));
    DI_ASSIGN_OR_RETURN(L.k, n.linear(p + "self_attn.k_proj", H, H, true));
    DI_ASSIGN_OR_RETURN(L.v, n.linear(p + "self_attn.v_proj", H, H, true));
    DI_ASSIGN_OR_RETURN(L.o, n.linear(p + "self_attn.out_proj", H, H, true));
    DI_ASSIGN_OR_RETURN(L.fc1, n.linear(p + "mlp.fc1", F, H, true));
    DI_ASSIGN_OR_RETURN(L.fc2, n.linear(p + "mlp.fc2", H, F, true));
  }
  DI_ASSIGN_OR_RETURN(w->proj1, n.linear(n.projector() + "multi_modal_projector.linear_1", T, H, c.projector_bias));
  DI_ASSIGN_OR_RETURN(w->proj2, n.linear(n.projector() + "multi_modal_projector.linear_2", T, T, c.projector_bias));
  return w;
}

}  // namespace deepinfer::vision
