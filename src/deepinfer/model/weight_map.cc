#include "deepinfer/model/weight_map.h"

#include <cstring>
#include <memory>

#include "deepinfer/model/format/gguf.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/tensor/quant.h"

namespace deepinfer::model {
namespace {

std::string substitute(std::string_view pattern, int layer) {
  std::string s(pattern);
  if (auto at = s.find("{L}"); at != std::string::npos) s.replace(at, 3, std::to_string(layer));
  return s;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Status check_shape(const Tensor& t, const std::vector<int64_t>& shape, const std::string& where,
                   std::string_view name) {
  bool match = t.ndim == static_cast<int>(shape.size());
  for (int i = 0; match && i < t.ndim; ++i) match = t.shape[i] == shape[i];
  // A 1-D tensor may be stored as [1, n] or [n]; accept equal element counts for vectors.
  if (!match && shape.size() == 1 && t.numel() == shape[0]) match = true;
  if (!match)
    return corrupt("{}: tensor '{}' has shape {} but the config implies {}", where, name, t.shape_string(),
                   shape_str(shape));
  return Status::ok();
}

const Tensor* WeightMap::lookup(std::string_view gguf_pattern, int layer, std::string* shown) const {
  if (source_.gguf) {
    *shown = substitute(gguf_pattern, layer);
    const auto* info = source_.gguf->find_tensor(*shown);
    if (!info) return nullptr;
    scratch_.push_back(source_.gguf->tensor(*info));
    return &scratch_.back();
  }
  for (const auto& n : names_) {
    if (n.gguf == gguf_pattern) {
      *shown = substitute(n.hf, layer);
      return source_.safetensors->find(*shown);
    }
  }
  *shown = substitute(gguf_pattern, layer);
  return nullptr;
}

Result<Tensor> WeightMap::get_optional(std::string_view pattern, int layer,
                                       std::vector<int64_t> shape) const {
  std::string name;
  const Tensor* t = lookup(pattern, layer, &name);
  if (!t) return Tensor{};
  DI_RETURN_IF_ERROR(check_shape(*t, shape, source_.description, name));
  return *t;
}

Result<Tensor> WeightMap::get(std::string_view pattern, int layer, std::vector<int64_t> shape) const {
  DI_ASSIGN_OR_RETURN(Tensor t, get_optional(pattern, layer, shape));
  if (t.empty()) {
    std::string name;
    lookup(pattern, layer, &name);
    return corrupt("{}: missing tensor '{}'", source_.description, name);
  }
  return t;
}

Result<Tensor> WeightMap::get_f32(std::string_view pattern, int layer, std::vector<int64_t> shape) const {
  DI_ASSIGN_OR_RETURN(Tensor t, get(pattern, layer, shape));
  return to_f32(t, pattern);
}

Result<Tensor> WeightMap::get_f32_optional(std::string_view pattern, int layer,
                                           std::vector<int64_t> shape) const {
  DI_ASSIGN_OR_RETURN(Tensor t, get_optional(pattern, layer, shape));
  if (t.empty()) return t;
  return to_f32(t, pattern);
}

Result<Tensor> to_f32(const Tensor& t, std::string_view name) {
  if (!can_dequantize(t.dtype))
    return unsupported("tensor '{}' has type {} which cannot be converted to f32", name,
                       dtype_name(t.dtype));
  auto storage = std::shared_ptr<float[]>(new float[static_cast<size_t>(t.numel())]);
  const int64_t rows = t.rows(), cols = t.cols();
  const size_t stride = t.row_stride_bytes();
  for (int64_t r = 0; r < rows; ++r)
    DI_RETURN_IF_ERROR(dequantize_row(t.dtype, static_cast<const uint8_t*>(t.data) + r * stride,
                                      storage.get() + r * cols, cols));
  Tensor out = t;
  out.dtype = DType::kF32;
  out.data = storage.get();
  out.owner = storage;
  return out;
}

}  // namespace deepinfer::model
