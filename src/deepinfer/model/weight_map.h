// Finds a model's tensors by canonical (GGUF-style) name in either file format, checks their
// shapes, and converts small tensors (norms, biases) to owned f32. Checkpoint-specific names
// come from a table per architecture, not code.
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/model.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::model {

// One row of a name table: canonical GGUF name pattern and Hugging Face name pattern; "{L}"
// stands for the layer index.
struct WeightName {
  std::string_view gguf;
  std::string_view hf;
};

class WeightMap {
 public:
  WeightMap(const WeightSource& source, std::vector<WeightName> names)
      : source_(source), names_(std::move(names)) {}

  // The tensor `gguf_pattern` (layer `layer` substituted), whose shape must equal `shape`
  // (outermost first). Missing or misshapen tensors are errors naming the tensor.
  Result<Tensor> get(std::string_view gguf_pattern, int layer, std::vector<int64_t> shape) const;
  // Like get(), but absent is fine (returns an empty Tensor).
  Result<Tensor> get_optional(std::string_view gguf_pattern, int layer, std::vector<int64_t> shape) const;
  // get() converted to owned f32 (for norms and biases).
  Result<Tensor> get_f32(std::string_view gguf_pattern, int layer, std::vector<int64_t> shape) const;
  Result<Tensor> get_f32_optional(std::string_view gguf_pattern, int layer, std::vector<int64_t> shape) const;

 private:
  const Tensor* lookup(std::string_view gguf_pattern, int layer, std::string* shown_name) const;
  const WeightSource& source_;
  std::vector<WeightName> names_;
  mutable std::deque<Tensor> scratch_;  // GGUF views returned by lookup (a deque never moves them)
};

// Ok when `t` has exactly `shape` (outermost first; a vector may also be stored [1, n]), else an
// error naming the checkpoint (`where`), the tensor and both shapes. Every weight loader uses it.
Status check_shape(const Tensor& t, const std::vector<int64_t>& shape, const std::string& where,
                   std::string_view name);

// Owned f32 copy of any float tensor (f32/f16/bf16/quantized rows).
Result<Tensor> to_f32(const Tensor& t, std::string_view name);

}  // namespace deepinfer::model
