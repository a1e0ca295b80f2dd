// Matrix multiplication against a weight matrix stored row-major in any supported GGUF type:
// output[r][o] = sum_i input[r][i] * W[o][i]. Quantized weights use 8-bit quantized activations
// and integer dot products (ggml's CPU design) in kInt8 mode; the default kHigh mode keeps
// activations in fp32 and dequantizes weight blocks in registers (error comparable to fp32).
// Float weights use FMA (or BLAS, see below) in both modes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "deepinfer/base/cpu_features.h"
#include "deepinfer/base/status.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::kernels {

// kInt8 rounds activations to 8 bits (fast but up to ~2 logits off on real models, enough to
// flip near-ties); kHigh dequantizes weights to fp32 and FMAs against fp32 activations.
enum class MatmulPrecision { kHigh, kInt8 };

struct MatmulParams {
  const void* weight = nullptr;    // [n_out] rows of weight_row_bytes
  DType weight_type = DType::kF32;
  int64_t n_out = 0;
  int64_t n_in = 0;                // multiple of the weight type's block size
  size_t weight_row_bytes = 0;     // >= row_bytes(weight_type, n_in)
  const float* input = nullptr;    // [n_rows, n_in], rows input_stride floats apart
  int64_t n_rows = 0;
  int64_t input_stride = 0;
  float* output = nullptr;         // [n_rows, n_out], rows output_stride floats apart
  int64_t output_stride = 0;
  // Our own kernels give each row the same bits whatever n_rows and the thread count are.
  // The only exception is F32 weights with many rows, which may go to BLAS sgemm (faster,
  // blocking depends on the shape); set this to force the fixed-order kernels there too.
  bool batch_invariant = false;
  MatmulPrecision precision = MatmulPrecision::kHigh;  // quantized weights only
};

// Validates types, sizes, strides and pointers; matmul() itself treats violations as bugs.
Status matmul_check(const MatmulParams& p);

// Uses the best ISA available (best_isa()). Shapes must be valid (see matmul_check).
void matmul(const MatmulParams& p, ThreadPool& pool);
void matmul_with_isa(const MatmulParams& p, ThreadPool& pool, IsaLevel isa);
// Up to kMaxMatmulGroup independent matmuls in one parallel run: each thread takes its share of
// every one's columns, so the group costs one hand-off to the pool instead of one per matmul
// (decode's q, k and v projections, or gate and up, are each only tens of microseconds of
// work). Every output is bitwise what matmul() gives for that params alone.
inline constexpr int kMaxMatmulGroup = 4;
void matmul_group(std::span<const MatmulParams> params, ThreadPool& pool);
void matmul_group_with_isa(std::span<const MatmulParams> params, ThreadPool& pool, IsaLevel isa);
// Single-threaded scalar reference: same activation handling as `precision` asks, plain C++
// accumulation (for kHigh the exact order the SIMD kernels use, see matmul_high_tile.h).
void matmul_reference(const MatmulParams& p);
bool matmul_supports(DType weight_type);

}  // namespace deepinfer::kernels
