// DeepSeek-V3 tensor lookup by Hugging Face name with shape checks; FP8 linear weights with their
// block scales.
#include "deepinfer/model/deepseek_v3_weights.h"

#include "deepinfer/kernels/cpu/matmul.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/weight_map.h"

namespace deepinfer::model {

bool DeepseekWeights::has(const std::string& name) const {
  return source_.safetensors && source_.safetensors->find(name) != nullptr;
}

Result<Tensor> DeepseekWeights::get(const std::string& name, std::vector<int64_t> shape) const {
  const Tensor* t = source_.safetensors ? source_.safetensors->find(name) : nullptr;
  if (!t) return corrupt("{}: missing tensor '{}'", source_.description, name);
  DI_RETURN_IF_ERROR(check_shape(*t, shape, source_.description, name));
  return *t;
}

Result<Tensor> DeepseekWeights::get_f32(const std::string& name, std::vector<int64_t> shape) const {
  DI_ASSIGN_OR_RETURN(Tensor t, get(name, std::move(shape)));
  return to_f32(t, name);
}

Result<LinearWeight> DeepseekWeights::linear(const std::string& prefix, int64_t n_out, int64_t n_in) const {
  LinearWeight w;
  DI_ASSIGN_OR_RETURN(w.weight, get(prefix + ".weight", {n_out, n_in}));
  if (w.weight.dtype == DType::kF8_E4M3) {
    const int64_t bo = (n_out + kFp8Block - 1) / kFp8Block, bi = (n_in + kFp8Block - 1) / kFp8Block;
    DI_ASSIGN_OR_RETURN(w.scale_inv, get_f32(prefix + ".weight_scale_inv", {bo, bi}));
    return w;
  }
  if (!kernels::matmul_supports(w.weight.dtype))
    return unsupported("{}: tensor '{}.weight' has unsupported type {}", source_.description, prefix,
                       dtype_name(w.weight.dtype));
  return w;
}

}  // namespace deepinfer::model
