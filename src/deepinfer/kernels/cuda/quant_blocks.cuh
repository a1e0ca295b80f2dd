// Device-side element decoding shared by the embedding and matmul kernels: fp16/bf16 bits and
// the GGUF Q8_0 / Q4_1 blocks (layouts as tensor/quant_blocks.h), FP8 e4m3, FP4 e2m1 and ue8m0
// scales (as kernels/cpu/fp8_matmul.h, fp4_matmul.h; every decoded value exact). Scale and offset
// are applied with explicitly rounded operations (no FMA contraction), so a dequantized value has
// the same bits as the CPU's dequantize_row.
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

// e4m3fn byte to float, exactly as kernels::fp8_e4m3_to_float (0x7f / 0xff are NaN).
__device__ __forceinline__ float fp8_e4m3_to_f32(uint32_t v) {
  const uint32_t e = (v >> 3) & 0xF, m = v & 7;
  float x;
  if (e == 0)
    x = __fmul_rn(static_cast<float>(m), 0x1p-9f);  // subnormal: m/8 * 2^-6
  else if (e == 15 && m == 7)
    x = __uint_as_float(0x7fc00000u);
  else
    x = __uint_as_float(((e + 120u) << 23) | (m << 20));  // (1 + m/8) * 2^(e - 7)
  return (v & 0x80) ? -x : x;
}

// One e2m1 nibble to float, as kernels::fp4_e2m1_to_float (0.5 * {0,1,2,3,4,6,8,12}, signed;
// code 8 is +0 there too).
__device__ __forceinline__ float fp4_e2m1_to_f32(uint32_t v) {
  const int code = static_cast<int>(v & 7);
  int twice = code < 4 ? code : (2 + (code & 1)) << ((code >> 1) - 1);
  if (v & 8) twice = -twice;
  return __fmul_rn(static_cast<float>(twice), 0.5f);
}

// ue8m0 byte to float, as kernels::ue8m0_to_float: 2^(v - 127), 0 -> 2^-127, 0xff -> NaN.
__device__ __forceinline__ float ue8m0_to_f32(uint32_t v) {
  if (v == 0xff) return __uint_as_float(0x7fc00000u);
  if (v == 0) return __uint_as_float(0x00400000u);
  return __uint_as_float(v << 23);
}

}  // namespace deepinfer::cuda::detail
