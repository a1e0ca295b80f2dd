// Row dequantization with SIMD fast paths (F16, BF16, Q8_0, Q4_0, Q4_1); other types fall back
// to the scalar tensor/quant.h code. Results are bit-identical to the scalar dequantize_row.
#pragma once

#include <cstdint>

#include "deepinfer/base/cpu_features.h"
#include "deepinfer/base/status.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::kernels {

Status dequantize_row_fast(DType type, const void* src, float* dst, int64_t n);
Status dequantize_row_with_isa(DType type, const void* src, float* dst, int64_t n, IsaLevel isa);

namespace dequantize_detail {
// True when it handled `type` (n already validated).
bool dequantize_avx2(DType type, const void* src, float* dst, int64_t n);
}  // namespace dequantize_detail

}  // namespace deepinfer::kernels
