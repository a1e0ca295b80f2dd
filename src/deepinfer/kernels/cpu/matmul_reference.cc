// Scalar dot products of one weight row with one (quantized) activation row: the reference all
// SIMD variants are compared to, and the kScalar variant itself. Integer sums per block are
// exact; only the float accumulation order differs from the SIMD code.
#include <cstring>

#include "deepinfer/base/check.h"
#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/matmul_high_tile.h"
#include "deepinfer/kernels/cpu/quantize_activation.h"
#include "deepinfer/tensor/quant_blocks.h"

namespace deepinfer::kernels::matmul_detail {
namespace {

float dot_float(DType type, const uint8_t* w, const float* x, int64_t n) {
  float acc = 0;
  if (type == DType::kF32) {
    const auto* wf = reinterpret_cast<const float*>(w);
    for (int64_t i = 0; i < n; ++i) acc += wf[i] * x[i];
  } else {
    const auto* wh = reinterpret_cast<const uint16_t*>(w);
    const bool bf = type == DType::kBF16;
    for (int64_t i = 0; i < n; ++i) acc += (bf ? bf16_to_f32(wh[i]) : f16_to_f32(wh[i])) * x[i];
  }
  return acc;
}

// The 32 weight values of a legacy block as integers, and its offset/min handling:
// value = d * q (+ m for the _1 formats).
int unpack32(DType type, const uint8_t* blk, int q[32], float* d, float* m) {
  *m = 0;
  switch (type) {
    case DType::kQ4_0: {
      const auto* b = reinterpret_cast<const BlockQ4_0*>(blk);
      *d = f16_to_f32(b->d);
      for (int j = 0; j < 16; ++j) q[j] = (b->qs[j] & 0xF) - 8, q[j + 16] = (b->qs[j] >> 4) - 8;
      return sizeof(BlockQ4_0);
    }
    case DType::kQ4_1: {
      const auto* b = reinterpret_cast<const BlockQ4_1*>(blk);
      *d = f16_to_f32(b->d), *m = f16_to_f32(b->m);
      for (int j = 0; j < 16; ++j) q[j] = b->qs[j] & 0xF, q[j + 16] = b->qs[j] >> 4;
      return sizeof(BlockQ4_1);
    }
    case DType::kQ5_0:
    case DType::kQ5_1: {
      const bool one = type == DType::kQ5_1;
      const uint8_t* qs = one ? reinterpret_cast<const BlockQ5_1*>(blk)->qs : reinterpret_cast<const BlockQ5_0*>(blk)->qs;
      const uint8_t* qhp = one ? reinterpret_cast<const BlockQ5_1*>(blk)->qh : reinterpret_cast<const BlockQ5_0*>(blk)->qh;
      uint32_t qh;
      std::memcpy(&qh, qhp, 4);
      *d = f16_to_f32(one ? reinterpret_cast<const BlockQ5_1*>(blk)->d : reinterpret_cast<const BlockQ5_0*>(blk)->d);
      if (one) *m = f16_to_f32(reinterpret_cast<const BlockQ5_1*>(blk)->m);
      const int off = one ? 0 : 16;
      for (int j = 0; j < 16; ++j) {
        q[j] = ((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - off;
        q[j + 16] = ((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - off;
      }
      return one ? sizeof(BlockQ5_1) : sizeof(BlockQ5_0);
    }
    case DType::kQ8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(blk);
      *d = f16_to_f32(b->d);
      for (int j = 0; j < 32; ++j) q[j] = b->qs[j];
      return sizeof(BlockQ8_0);
    }
    default:
      DI_CHECK(false, "unpack32: not a 32-element format: {}", dtype_name(type));
  }
  return 0;
}

float dot_q8_32(DType type, const uint8_t* w, const ActBlock32* a, int64_t n) {
  float acc = 0;
  int q[32];
  for (int64_t b = 0; b < n / 32; ++b) {
    float d, m;
    w += unpack32(type, w, q, &d, &m);
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += q[j] * a[b].qs[j];
    acc += (d * a[b].d) * static_cast<float>(isum);
    if (m != 0) acc += (m * a[b].d) * static_cast<float>(a[b].sum);
  }
  return acc;
}

// K-quants: each super-block gives an exact integer sum times the two super-block scales.
float dot_q8_k(DType type, const uint8_t* w, const BlockQ8_K* a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const int8_t* x = a[b].qs;
    int32_t isum = 0, msum = 0;
    float d, dmin = 0;
    if (type == DType::kQ4_K || type == DType::kQ5_K) {
      const uint8_t *scales, *qs, *qh = nullptr;
      if (type == DType::kQ4_K) {
        const auto* k = reinterpret_cast<const BlockQ4_K*>(w) + b;
        d = f16_to_f32(k->d), dmin = f16_to_f32(k->dmin), scales = k->scales, qs = k->qs;
      } else {
        const auto* k = reinterpret_cast<const BlockQ5_K*>(w) + b;
        d = f16_to_f32(k->d), dmin = f16_to_f32(k->dmin), scales = k->scales, qs = k->qs, qh = k->qh;
      }
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        kquant_scale_min(j, scales, &sc, &m);
        int32_t dot = 0;
        for (int l = 0; l < 32; ++l) {
          int v = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
          if (qh) v |= ((qh[l] >> j) & 1) << 4;
          dot += v * x[32 * j + l];
        }
        isum += sc * dot;
        msum += m * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
      }
    } else {
      DI_CHECK(type == DType::kQ6_K, "dot_q8_k: not a K format: {}", dtype_name(type));
      const auto* k = reinterpret_cast<const BlockQ6_K*>(w) + b;
      d = f16_to_f32(k->d);
      for (int e = 0; e < kQKK; ++e) {
        const int half = e / 128, r = e % 128, l = r % 32, t = r / 32;  // t: which 32-run
        const uint8_t lo = k->ql[64 * half + l + 32 * (t & 1)] >> (4 * (t >> 1));
        const int v = (lo & 0xF) | (((k->qh[32 * half + l] >> (2 * t)) & 3) << 4);
        isum += k->scales[e / 16] * v * x[e];
      }
      // The stored 6-bit values are offset by 32; subtract in integers to avoid cancellation.
      for (int g = 0; g < 16; ++g) isum -= 32 * k->scales[g] * a[b].bsums[g];
    }
    acc += (a[b].d * d) * static_cast<float>(isum) - (a[b].d * dmin) * static_cast<float>(msum);
  }
  return acc;
}

}  // namespace

ActKind act_kind(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: return ActKind::kFloat;
    case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K: return ActKind::kQ8_K;
    default: return ActKind::kQ8_32;
  }
}

void compute_tile_scalar(const Tile& t) {
  const ActKind kind = act_kind(t.type);
  if (t.high && kind != ActKind::kFloat) return compute_high_tile_scalar(t);
  for (int r = 0; r < t.rows; ++r) {
    const uint8_t* act = t.act + r * t.act_row_bytes;
    for (int64_t o = t.col_begin; o < t.col_end; ++o) {
      const uint8_t* w = t.weight + o * t.weight_row_bytes;
      float v;
      if (kind == ActKind::kFloat) v = dot_float(t.type, w, reinterpret_cast<const float*>(act), t.n_in);
      else if (kind == ActKind::kQ8_32) v = dot_q8_32(t.type, w, reinterpret_cast<const ActBlock32*>(act), t.n_in);
      else v = dot_q8_k(t.type, w, reinterpret_cast<const BlockQ8_K*>(act), t.n_in);
      t.out[r * t.out_stride + o] = v;
    }
  }
}

}  // namespace deepinfer::kernels::matmul_detail
