// CUDA matmul against a row-major weight matrix, as kernels/cpu/matmul.h:
// output[r][o] = sum_i input[r][i] * W[o][i], fp32 activations and output, pointers in device
// memory. Two implementations:
//  - warp_matmul: our own kernel for F32, F16, BF16, Q8_0 and Q4_1 weights; one warp per
//    output element, weights dequantized in registers, fp32 accumulation. Batch-invariant by
//    construction: lane l sums chunks l, l+32, ... of the row in index order and the 32 lane
//    sums meet in a fixed butterfly, so row r's bits depend on row r alone.
//  - fp8_matmul / fp4_matmul: the same kernel for the block-scaled formats of
//    kernels/cpu/fp8_matmul.h (e4m3, float scale_inv per block x block) and fp4_matmul.h
//    (e2m1 pairs, ue8m0 scale per 32 inputs): each 32-input chunk is dotted in fp32 and then
//    scaled once, the lanes and the butterfly as above.
//  - grouped_matmul (moe_matmul.h): the same kernels over rows sorted by expert.
//  - blas_matmul.h: cuBLASLt for F16/BF16 (activations rounded to the weight type first) with
//    one algorithm fixed per weight shape and split-K off.
// This header stays free of fmt so nvcc compiles little; host checks are in checks.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "deepinfer/tensor/dtype.h"

namespace deepinfer::cuda {

struct MatmulParams {
  const void* weight = nullptr;  // [n_out] rows of weight_row_bytes
  DType weight_type = DType::kF32;
  int64_t n_out = 0;
  int64_t n_in = 0;              // multiple of 32 for Q8_0 / Q4_1
  size_t weight_row_bytes = 0;   // >= row_bytes(weight_type, n_in); even for 16-bit types
  const float* input = nullptr;  // [n_rows, input_stride]
  int64_t n_rows = 0;
  int64_t input_stride = 0;
  float* output = nullptr;  // [n_rows, output_stride]
  int64_t output_stride = 0;
};

// FP8 e4m3 weights with float scale_inv per block x block, as kernels::Fp8MatmulParams:
// output[r][o] = sum_i input[r][i] * fp8(W[o][i]) * scale_inv[o / block][i / block].
struct Fp8MatmulParams {
  const uint8_t* weight = nullptr;   // [n_out] rows of weight_row_bytes, e4m3fn bytes
  size_t weight_row_bytes = 0;       // >= n_in
  const float* scale_inv = nullptr;  // [ceil(n_out / block), scale_stride]
  int64_t scale_stride = 0;          // floats between scale rows, >= ceil(n_in / block)
  int block = 128;                   // block edge in both directions; a multiple of 32 here
  int64_t n_out = 0;
  int64_t n_in = 0;
  const float* input = nullptr;  // [n_rows, input_stride]
  int64_t n_rows = 0;
  int64_t input_stride = 0;
  float* output = nullptr;  // [n_rows, output_stride]
  int64_t output_stride = 0;
};
void fp8_matmul(const Fp8MatmulParams& p, cudaStream_t stream);

// FP4 e2m1 weights (two per byte, low nibble = even input) with a ue8m0 scale per 32 inputs,
// as kernels::Fp4MatmulParams.
struct Fp4MatmulParams {
  const uint8_t* weight = nullptr;  // [n_out] rows of weight_row_bytes, packed e2m1 pairs
  size_t weight_row_bytes = 0;      // >= n_in / 2
  const uint8_t* scale = nullptr;   // [n_out, scale_stride] ue8m0 bytes
  int64_t scale_stride = 0;         // bytes between scale rows, >= ceil(n_in / 32)
  int64_t n_out = 0;
  int64_t n_in = 0;              // even
  const float* input = nullptr;  // [n_rows, input_stride]
  int64_t n_rows = 0;
  int64_t input_stride = 0;
  float* output = nullptr;  // [n_rows, output_stride]
  int64_t output_stride = 0;
};
void fp4_matmul(const Fp4MatmulParams& p, cudaStream_t stream);

// The weight types warp_matmul handles (the dispatch table in warp_matmul.cu).
bool warp_matmul_supports(DType weight_type);
void warp_matmul(const MatmulParams& p, cudaStream_t stream);

// dst[r][i] = src[r][i] rounded to F16 or BF16 (round to nearest even), dst rows n_in apart:
// the activations of the cuBLASLt path.
void convert_rows_f32(const float* src, int64_t n_rows, int64_t n_in, int64_t src_stride, void* dst,
                      DType dst_type, cudaStream_t stream);

}  // namespace deepinfer::cuda
