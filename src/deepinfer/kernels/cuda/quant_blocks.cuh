// Device-side element decoding shared by the embedding and matmul kernels: fp16/bf16 bits and
// the GGUF Q8_0 / Q4_1 blocks (layouts as tensor/quant_blocks.h). Scale and offset are applied
// with explicitly rounded operations (no FMA contraction), so a dequantized value has the same
// bits as the CPU's dequantize_row.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace deepinfer::cuda::detail {

constexpr int kQK = 32;  // elements per Q8_0 / Q4_1 block
constexpr int kQ8_0Bytes = 2 + kQK;
constexpr int kQ4_1Bytes = 4 + kQK / 2;

__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));  // blocks are only 2-byte aligned
}
__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// The 32 values of one Q8_0 block at `blk`.
__device__ __forceinline__ void dequant_q8_0(const uint8_t* blk, float* w) {
  const float d = f16_bits_to_f32(load_u16(blk));
  const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
#pragma unroll
  for (int j = 0; j < kQK; ++j) w[j] = __fmul_rn(static_cast<float>(qs[j]), d);
}

// The 32 values of one Q4_1 block: element j in the low nibble of qs[j], j+16 in the high one.
__device__ __forceinline__ void dequant_q4_1(const uint8_t* blk, float* w) {
  const float d = f16_bits_to_f32(load_u16(blk));
  const float m = f16_bits_to_f32(load_u16(blk + 2));
  const uint8_t* qs = blk + 4;
#pragma unroll
  for (int j = 0; j < kQK / 2; ++j) {
    w[j] = __fadd_rn(__fmul_rn(static_cast<float>(qs[j] & 0xF), d), m);
    w[j + kQK / 2] = __fadd_rn(__fmul_rn(static_cast<float>(qs[j] >> 4), d), m);
  }
}

}  // namespace deepinfer::cuda::detail
