// Scalar kHigh matmul (the reference and the kScalar variant): each weight chunk of 32 is
// dequantized to fp32, then FMA'd against fp32 activations in the order matmul_high_tile.h fixes.
#include <cmath>
#include <cstring>

#include "deepinfer/base/check.h"
#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/matmul_high_tile.h"
#include "deepinfer/tensor/quant_blocks.h"

namespace deepinfer::kernels::matmul_detail {
namespace {

// Integers, scales and min of chunk c of a weight row (see matmul_high_tile.h).
void chunk_scalar(DType type, const uint8_t* row, int64_t c, int q[32], float* d0, float* d1, float* m) {
  *m = 0;
  switch (type) {
    case DType::kQ4_0: {
      const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[c];
      *d0 = f16_to_f32(b.d);
      for (int j = 0; j < 16; ++j) q[j] = (b.qs[j] & 0xF) - 8, q[j + 16] = (b.qs[j] >> 4) - 8;
      break;
    }
    case DType::kQ4_1: {
      const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[c];
      *d0 = f16_to_f32(b.d), *m = f16_to_f32(b.m);
      for (int j = 0; j < 16; ++j) q[j] = b.qs[j] & 0xF, q[j + 16] = b.qs[j] >> 4;
      break;
    }
    case DType::kQ5_0:
    case DType::kQ5_1: {
      const bool one = type == DType::kQ5_1;
      const uint8_t* qs = one ? reinterpret_cast<const BlockQ5_1*>(row)[c].qs : reinterpret_cast<const BlockQ5_0*>(row)[c].qs;
      const uint8_t* qhp = one ? reinterpret_cast<const BlockQ5_1*>(row)[c].qh : reinterpret_cast<const BlockQ5_0*>(row)[c].qh;
      uint32_t qh;
      std::memcpy(&qh, qhp, 4);
      *d0 = f16_to_f32(one ? reinterpret_cast<const BlockQ5_1*>(row)[c].d : reinterpret_cast<const BlockQ5_0*>(row)[c].d);
      if (one) *m = f16_to_f32(reinterpret_cast<const BlockQ5_1*>(row)[c].m);
      const int off = one ? 0 : 16;
      for (int j = 0; j < 16; ++j) {
        q[j] = ((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - off;
        q[j + 16] = ((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - off;
      }
      break;
    }
    case DType::kQ8_0: {
      const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[c];
      *d0 = f16_to_f32(b.d);
      for (int j = 0; j < 32; ++j) q[j] = b.qs[j];
      break;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const int j = static_cast<int>(c % 8);
      const uint8_t *scales, *qs, *qh = nullptr;
      float d, dmin;
      if (type == DType::kQ4_K) {
        const auto& k = reinterpret_cast<const BlockQ4_K*>(row)[c / 8];
        d = f16_to_f32(k.d), dmin = f16_to_f32(k.dmin), scales = k.scales, qs = k.qs;
      } else {
        const auto& k = reinterpret_cast<const BlockQ5_K*>(row)[c / 8];
        d = f16_to_f32(k.d), dmin = f16_to_f32(k.dmin), scales = k.scales, qs = k.qs, qh = k.qh;
      }
      uint8_t sc, mn;
      kquant_scale_min(j, scales, &sc, &mn);
      *d0 = d * static_cast<float>(sc), *m = -(dmin * static_cast<float>(mn));
      for (int l = 0; l < 32; ++l) {
        int v = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        if (qh) v |= ((qh[l] >> j) & 1) << 4;
        q[l] = v;
      }
      break;
    }
    case DType::kQ6_K: {
      const auto& k = reinterpret_cast<const BlockQ6_K*>(row)[c / 8];
      const int ci = static_cast<int>(c % 8), half = ci / 4, t = ci % 4;
      const float d = f16_to_f32(k.d);
      *d0 = d * static_cast<float>(k.scales[2 * ci]), *d1 = d * static_cast<float>(k.scales[2 * ci + 1]);
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = k.ql[64 * half + l + 32 * (t & 1)] >> (4 * (t >> 1));
        q[l] = ((lo & 0xF) | (((k.qh[32 * half + l] >> (2 * t)) & 3) << 4)) - 32;
      }
      return;
    }
    default:
      DI_CHECK(false, "matmul kHigh: not a quantized format: {}", dtype_name(type));
  }
  *d1 = *d0;
}

float dot_high(DType type, const uint8_t* w, const float* x, int64_t n) {
  float acc[16] = {};
  int q[32];
  for (int64_t c = 0; c < n / 32; ++c) {
    float d0, d1, m;
    chunk_scalar(type, w, c, q, &d0, &d1, &m);
    for (int j = 0; j < 32; ++j) {
      const float wv = std::fma(j < 16 ? d0 : d1, static_cast<float>(q[j]), m);
      acc[j % 16] = std::fma(wv, x[32 * c + j], acc[j % 16]);
    }
  }
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = acc[l] + acc[8 + l];
  return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

}  // namespace

void compute_high_tile_scalar(const Tile& t) {
  for (int r = 0; r < t.rows; ++r) {
    const float* x = reinterpret_cast<const float*>(t.act + r * t.act_row_bytes);
    for (int64_t o = t.col_begin; o < t.col_end; ++o)
      t.out[r * t.out_stride + o] = dot_high(t.type, t.weight + o * t.weight_row_bytes, x, t.n_in);
  }
}

}  // namespace deepinfer::kernels::matmul_detail
