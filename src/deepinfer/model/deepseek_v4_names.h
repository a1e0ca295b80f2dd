// DeepSeek-V4 tensor lookup by canonical (DeepSeek) name: tried as is, under "model." (what
// save_pretrained writes) and under transformers' renamed form (one table, deepseek_v4_names.cc);
// typed getters that check shapes and name the checkpoint or shard file and the tensor in errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4_weights.h"
#include "deepinfer/model/layers/linear.h"
#include "deepinfer/model/model.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::model {

class V4Names {
 public:
  explicit V4Names(const WeightSource& source) : source_(source) {}

  // The names `canonical` may be stored under, DeepSeek's first.
  std::vector<std::string> candidates(const std::string& canonical) const;
  // The stored tensor, or nullptr.
  const Tensor* find(const std::string& canonical) const;
  // The shard file holding `canonical` (the checkpoint when absent), for errors about contents.
  std::string file_of(const std::string& canonical) const;
  // "missing tensor" naming the checkpoint, `canonical` and another name it was looked for under.
  Status missing(const std::string& canonical) const;
  // The tensor, whose shape must be `shape`.
  Result<Tensor> get(const std::string& canonical, const std::vector<int64_t>& shape) const;
  // get() as owned f32 (f32, bf16 or f16 stored).
  Result<Tensor> get_f32(const std::string& canonical, const std::vector<int64_t>& shape) const;
  // A block-scale tensor as owned f32: float types, or ue8m0 (F8_E8M0, 2^(byte - 127)) as
  // DeepSeek ships them.
  Result<Tensor> get_scale(const std::string& canonical, const std::vector<int64_t>& shape) const;

  // A linear weight `prefix`.weight [n_out, n_in] with its FP8 block scale when it is FP8.
  Result<LinearWeight> linear(const std::string& prefix, int64_t n_out, int64_t n_in) const;
  Result<LinearWeight> with_scale(LinearWeight w, const std::string& prefix) const;

  // An FP4 expert projection (V4Fp4Linear): the packed I8 weight and its ue8m0 scale, checked
  // and kept as stored. Every scale byte is read once here: a NaN (0xff) or one whose weights
  // overflow f32 (6 * 2^(b - 127), b > 252) would poison every token routed to the expert.
  Result<V4Fp4Linear> fp4_linear(const std::string& prefix, int64_t n_out, int64_t n_in) const;

  const WeightSource& source() const { return source_; }

 private:
  const WeightSource& source_;
};

}  // namespace deepinfer::model
