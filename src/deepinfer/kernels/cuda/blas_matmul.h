// cuBLASLt matmul for F16/BF16 weights: output = input * W^T with fp32 output and fp32
// accumulation, the activations rounded to the weight type first (so results differ from the
// CPU's fp32-activation kHigh path by that rounding; tolerances in docs/cuda.md).
//
// Batch invariance: the algorithm is chosen once per weight shape (type, n_out, n_in, strides)
// by cuBLASLt's heuristic for a fixed planning row count, with split-K forced to 1, the
// reduction scheme forced to none and no workspace, and then reused for every row count. The
// reduction order over n_in is then the chosen kernel's K loop, which does not depend on how
// many rows share the call. This holds only if the fixed kernel has no other row-count-
// dependent path; it has never been checked on a GPU (the GPU test checks it bitwise). The
// engine's batch-invariant mode is meant to use warp_matmul, invariant by construction.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "deepinfer/base/status.h"
#include "deepinfer/kernels/cuda/matmul.h"

namespace deepinfer::cuda {

// invalid_argument unless p suits the cuBLASLt path: F16/BF16 weights, 16-byte aligned weight
// and output pointers, weight rows a multiple of 16 bytes, output rows of whole floats.
Status check_blas_matmul(const MatmulParams& p);

class BlasMatmul {
 public:
  [[nodiscard]] static Result<BlasMatmul> create();
  ~BlasMatmul();
  BlasMatmul(BlasMatmul&&) noexcept;
  BlasMatmul& operator=(BlasMatmul&&) noexcept;
  BlasMatmul(const BlasMatmul&) = delete;
  BlasMatmul& operator=(const BlasMatmul&) = delete;

  // Device bytes `run` needs for the rounded activations of p.
  static size_t activation_bytes(const MatmulParams& p);
  // Enqueues p on `stream`; `activations` holds at least activation_bytes(p) device bytes.
  // Plans the weight shape on first use (host-side heuristic query).
  [[nodiscard]] Status run(const MatmulParams& p, void* activations, cudaStream_t stream);

  // Rows the heuristic is asked about when a shape is planned (any fixed value would do).
  static constexpr int64_t kPlanRows = 128;

 private:
  struct Plan;
  using Key = std::tuple<DType, int64_t, int64_t, size_t,
                         int64_t>;  // type, n_out, n_in, row bytes, out stride
  BlasMatmul() = default;
  Result<const Plan*> plan(const MatmulParams& p);

  void* handle_ = nullptr;  // cublasLtHandle_t
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace deepinfer::cuda
