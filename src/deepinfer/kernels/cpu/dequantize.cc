// Dispatch of the fast row dequantizer: SIMD when the CPU and type allow, scalar otherwise.
#include "deepinfer/kernels/cpu/dequantize.h"

#include "deepinfer/tensor/quant.h"

namespace deepinfer::kernels {

Status dequantize_row_fast(DType type, const void* src, float* dst, int64_t n) {
  return dequantize_row_with_isa(type, src, dst, n, best_isa());
}

Status dequantize_row_with_isa(DType type, const void* src, float* dst, int64_t n, IsaLevel isa) {
  if (static_cast<int>(isa) > static_cast<int>(best_isa())) isa = best_isa();
  if (isa != IsaLevel::kScalar) {
    auto info = dtype_info(type);
    if (info && n >= 0 && n % info->block_elems == 0 && dequantize_detail::dequantize_avx2(type, src, dst, n))
      return Status::ok();
  }
  return dequantize_row(type, src, dst, n);
}

}  // namespace deepinfer::kernels
