// Element types of weights and activations. Quantized types are the GGUF/ggml block formats;
// the enum values equal ggml's type ids so GGUF files map directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace deepinfer {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  // Not ggml types: safetensors-only formats.
  kF8_E4M3 = 1000,
  kF8_E5M2 = 1001,
  kF8_E8M0 = 1002,  // ue8m0: a power-of-two scale 2^(byte - 127) (DeepSeek-V4's block scales)
};

struct DTypeInfo {
  std::string_view name;   // "f32", "q4_k", ...
  int64_t block_elems;     // elements per block (1 for plain types)
  size_t block_bytes;      // bytes per block
  bool quantized;
};

// nullopt for an id we do not know (callers turn that into a clear "unsupported type" error).
std::optional<DTypeInfo> dtype_info(DType t);
std::optional<DType> dtype_from_ggml_id(uint32_t id);
std::string_view dtype_name(DType t);

// Bytes of a row of n elements; n must be a multiple of the block size.
size_t row_bytes(DType t, int64_t n);

}  // namespace deepinfer
