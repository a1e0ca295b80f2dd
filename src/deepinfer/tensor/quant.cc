// Scalar dequantize/quantize of the 32-element GGUF formats and the dispatch over all formats.
// Quantizers follow ggml's *_ref functions (round-to-nearest, same float operation order).
#include "deepinfer/tensor/quant.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "deepinfer/base/fp16.h"
#include "deepinfer/tensor/quant_blocks.h"

namespace deepinfer {
namespace {

using namespace quant_detail;

void dequantize_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0xF) - 8) * d;
      y[j + 16] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b[i].qs[j] & 0xF) * d + m;
      y[j + 16] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

void dequantize_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
      y[j] = static_cast<float>(((b[i].qs[j] & 0xF) | h0) - 16) * d;
      y[j + 16] = static_cast<float>(((b[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
      y[j] = static_cast<float>((b[i].qs[j] & 0xF) | h0) * d + m;
      y[j + 16] = static_cast<float>((b[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

template <typename Block>
void dequantize_q8(const Block* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// The signed value of largest magnitude (first one on ties), as ggml picks it.
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, int n, float* mn, float* mx) {
  *mn = FLT_MAX;
  *mx = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    *mn = std::fmin(*mn, x[j]);
    *mx = std::fmax(*mx, x[j]);
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float mn, mx;
    min_max(x, kQK, &mn, &mx);
    const float d = (mx - mn) / 15;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    b[i].m = f32_to_f16(mn);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - mn) * id + 0.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - mn) * id + 0.5f)));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float mn, mx;
    min_max(x, kQK, &mn, &mx);
    const float d = (mx - mn) / 31;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    b[i].m = f32_to_f16(mn);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, static_cast<int>(static_cast<uint8_t>((x[j] - mn) * id + 0.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<uint8_t>((x[j + 16] - mn) * id + 0.5f)));
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

// Q8_0 and Q8_1 share the scale and rounding; Q8_1 also stores d * sum(qs).
template <typename Block, bool kWithSum>
void quantize_q8(const float* x, Block* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      b[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += b[i].qs[j];
    }
    if constexpr (kWithSum) b[i].s = f32_to_f16(static_cast<float>(sum) * d);
  }
}

Status check_row(DType type, int64_t n, const char* what) {
  auto info = dtype_info(type);
  if (!info) return unsupported("{}: unknown dtype id {}", what, static_cast<uint32_t>(type));
  if (n < 0 || n % info->block_elems != 0)
    return invalid_argument("{}: row of {} elements is not a multiple of the {} block size {}", what,
                            n, info->name, info->block_elems);
  return Status::ok();
}

}  // namespace

bool can_dequantize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16:
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1:
    case DType::kQ8_0: case DType::kQ8_1: case DType::kQ2_K: case DType::kQ3_K:
    case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K: case DType::kQ8_K:
      return true;
    default:
      return false;
  }
}

bool can_quantize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16:
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1:
    case DType::kQ8_0: case DType::kQ8_1: case DType::kQ8_K:
      return true;
    default:
      return false;
  }
}

Status dequantize_row(DType type, const void* src, float* y, int64_t n) {
  DI_RETURN_IF_ERROR(check_row(type, n, "dequantize_row"));
  const int64_t nb = n / kQK;
  switch (type) {
    case DType::kF32: std::memcpy(y, src, static_cast<size_t>(n) * 4); break;
    case DType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(h[i]);
      break;
    }
    case DType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(h[i]);
      break;
    }
    case DType::kQ4_0: dequantize_q4_0(static_cast<const BlockQ4_0*>(src), y, nb); break;
    case DType::kQ4_1: dequantize_q4_1(static_cast<const BlockQ4_1*>(src), y, nb); break;
    case DType::kQ5_0: dequantize_q5_0(static_cast<const BlockQ5_0*>(src), y, nb); break;
    case DType::kQ5_1: dequantize_q5_1(static_cast<const BlockQ5_1*>(src), y, nb); break;
    case DType::kQ8_0: dequantize_q8(static_cast<const BlockQ8_0*>(src), y, nb); break;
    case DType::kQ8_1: dequantize_q8(static_cast<const BlockQ8_1*>(src), y, nb); break;
    case DType::kQ2_K: dequantize_q2_k(src, y, n); break;
    case DType::kQ3_K: dequantize_q3_k(src, y, n); break;
    case DType::kQ4_K: dequantize_q4_k(src, y, n); break;
    case DType::kQ5_K: dequantize_q5_k(src, y, n); break;
    case DType::kQ6_K: dequantize_q6_k(src, y, n); break;
    case DType::kQ8_K: dequantize_q8_k(src, y, n); break;
    default: return unsupported("dequantize_row: no dequantizer for {}", dtype_name(type));
  }
  return Status::ok();
}

Status quantize_row(DType type, const float* x, void* dst, int64_t n) {
  DI_RETURN_IF_ERROR(check_row(type, n, "quantize_row"));
  const int64_t nb = n / kQK;
  switch (type) {
    case DType::kF32: std::memcpy(dst, x, static_cast<size_t>(n) * 4); break;
    case DType::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(x[i]);
      break;
    }
    case DType::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(x[i]);
      break;
    }
    case DType::kQ4_0: quantize_q4_0(x, static_cast<BlockQ4_0*>(dst), nb); break;
    case DType::kQ4_1: quantize_q4_1(x, static_cast<BlockQ4_1*>(dst), nb); break;
    case DType::kQ5_0: quantize_q5_0(x, static_cast<BlockQ5_0*>(dst), nb); break;
    case DType::kQ5_1: quantize_q5_1(x, static_cast<BlockQ5_1*>(dst), nb); break;
    case DType::kQ8_0: quantize_q8<BlockQ8_0, false>(x, static_cast<BlockQ8_0*>(dst), nb); break;
    case DType::kQ8_1: quantize_q8<BlockQ8_1, true>(x, static_cast<BlockQ8_1*>(dst), nb); break;
    case DType::kQ8_K: quantize_q8_k(x, dst, n); break;
    default: return unsupported("quantize_row: no quantizer for {}", dtype_name(type));
  }
  return Status::ok();
}

}  // namespace deepinfer
