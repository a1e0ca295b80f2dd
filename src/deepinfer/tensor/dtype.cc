#include "deepinfer/tensor/dtype.h"

#include "deepinfer/base/check.h"

namespace deepinfer {

std::optional<DTypeInfo> dtype_info(DType t) {
  switch (t) {
    case DType::kF32: return DTypeInfo{"f32", 1, 4, false};
    case DType::kF16: return DTypeInfo{"f16", 1, 2, false};
    case DType::kBF16: return DTypeInfo{"bf16", 1, 2, false};
    case DType::kF64: return DTypeInfo{"f64", 1, 8, false};
    case DType::kI8: return DTypeInfo{"i8", 1, 1, false};
    case DType::kI16: return DTypeInfo{"i16", 1, 2, false};
    case DType::kI32: return DTypeInfo{"i32", 1, 4, false};
    case DType::kI64: return DTypeInfo{"i64", 1, 8, false};
    case DType::kF8_E4M3: return DTypeInfo{"f8_e4m3", 1, 1, false};
    case DType::kF8_E5M2: return DTypeInfo{"f8_e5m2", 1, 1, false};
    case DType::kF8_E8M0: return DTypeInfo{"f8_e8m0", 1, 1, false};
    case DType::kQ4_0: return DTypeInfo{"q4_0", 32, 18, true};
    case DType::kQ4_1: return DTypeInfo{"q4_1", 32, 20, true};
    case DType::kQ5_0: return DTypeInfo{"q5_0", 32, 22, true};
    case DType::kQ5_1: return DTypeInfo{"q5_1", 32, 24, true};
    case DType::kQ8_0: return DTypeInfo{"q8_0", 32, 34, true};
    case DType::kQ8_1: return DTypeInfo{"q8_1", 32, 36, true};
    case DType::kQ2_K: return DTypeInfo{"q2_k", 256, 84, true};
    case DType::kQ3_K: return DTypeInfo{"q3_k", 256, 110, true};
    case DType::kQ4_K: return DTypeInfo{"q4_k", 256, 144, true};
    case DType::kQ5_K: return DTypeInfo{"q5_k", 256, 176, true};
    case DType::kQ6_K: return DTypeInfo{"q6_k", 256, 210, true};
    case DType::kQ8_K: return DTypeInfo{"q8_k", 256, 292, true};
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_ggml_id(uint32_t id) {
  auto t = static_cast<DType>(id);
  if (id >= 1000 || !dtype_info(t)) return std::nullopt;
  return t;
}

std::string_view dtype_name(DType t) {
  auto info = dtype_info(t);
  return info ? info->name : std::string_view("unknown");
}

size_t row_bytes(DType t, int64_t n) {
  auto info = dtype_info(t);
  DI_CHECK(info.has_value(), "unknown dtype {}", static_cast<uint32_t>(t));
  DI_CHECK(n % info->block_elems == 0, "row of {} not a multiple of block {}", n, info->block_elems);
  return static_cast<size_t>(n / info->block_elems) * info->block_bytes;
}

}  // namespace deepinfer
