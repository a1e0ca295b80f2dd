// A tensor is a typed view: dtype + shape + row-major contiguous data, borrowed (e.g. from an
// mmapped model file) or owned. No autograd, no op graph. Shape is outermost-first:
// a weight [rows=out_features, cols=in_features] has shape {n_out, n_in}.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "deepinfer/tensor/dtype.h"

namespace deepinfer {

struct Tensor {
  static constexpr int kMaxDims = 4;
  DType dtype = DType::kF32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};  // outermost first
  const void* data = nullptr;
  std::shared_ptr<void> owner;  // keeps owned storage alive; null for borrowed views

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  int64_t rows() const {
    if (ndim <= 1) return 1;
    int64_t n = 1;
    for (int i = 0; i + 1 < ndim; ++i) n *= shape[i];
    return n;
  }
  int64_t cols() const { return ndim == 0 ? 1 : shape[ndim - 1]; }
  size_t nbytes() const { return row_bytes(dtype, cols()) * static_cast<size_t>(rows()); }
  size_t row_stride_bytes() const { return row_bytes(dtype, cols()); }
  bool empty() const { return data == nullptr; }
  std::string shape_string() const;
};

}  // namespace deepinfer
