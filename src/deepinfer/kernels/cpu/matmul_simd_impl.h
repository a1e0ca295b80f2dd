// The SIMD matmul tile kernels, written once with 256-bit integer/FMA intrinsics and compiled
// twice: in matmul_avx2.cc (maddubs+madd dot) and matmul_avx512.cc (VNNI vpdpbusd dot). Both
// give the same integer sums. Include only inside an anonymous namespace after <immintrin.h>,
// with DI_MATMUL_VNNI defined to 0 or 1. Tiles are up to 8 rows with VNNI (AVX-512 has 32
// vector registers), up to 4 without.
//
// Batch invariance: a kernel instantiated for R rows does, for every row, exactly the
// operations the R = 1 instance does, in the same order; only the weight decode is shared.

inline __m256i dot_u8s8(__m256i u, __m256i s) {
#if DI_MATMUL_VNNI
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  // No saturation: |u * s| pairs stay below 2 * 128 * 127 for every format used here.
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// Hardware fp16 -> fp32 (F16C); the same value as base/fp16.h's f16_to_f32, much faster.
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// Byte j = 0xFF where bit j of x is set.
inline __m256i bits_to_bytes(uint32_t x) {
  const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuf);
  const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
  return _mm256_cmpeq_epi8(_mm256_or_si256(v, others), _mm256_set1_epi64x(-1));
}

// 16 packed bytes -> 32 nibbles: low nibbles are elements 0..15, high nibbles 16..31.
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0xF);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m4), _mm_and_si128(x, m4));
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Decoders for the 32-element formats: q() gives the block's 32 integers as bytes (signed when
// kSigned, else unsigned with a min m()).
struct DecQ4_0 {
  using B = BlockQ4_0;
  static constexpr bool kSigned = true;
  static __m256i q(const B* b) { return _mm256_sub_epi8(nibbles32(b->qs), _mm256_set1_epi8(8)); }
  static float m(const B*) { return 0; }
};
struct DecQ4_1 {
  using B = BlockQ4_1;
  static constexpr bool kSigned = false;
  static __m256i q(const B* b) { return nibbles32(b->qs); }
  static float m(const B* b) { return h2f(b->m); }
};
struct DecQ5_0 {
  using B = BlockQ5_0;
  static constexpr bool kSigned = true;
  static __m256i q(const B* b) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes(load_u32(b->qh)), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b->qs), hi), _mm256_set1_epi8(16));
  }
  static float m(const B*) { return 0; }
};
struct DecQ5_1 {
  using B = BlockQ5_1;
  static constexpr bool kSigned = false;
  static __m256i q(const B* b) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes(load_u32(b->qh)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(nibbles32(b->qs), hi);
  }
  static float m(const B* b) { return h2f(b->m); }
};
struct DecQ8_0 {
  using B = BlockQ8_0;
  static constexpr bool kSigned = true;
  static __m256i q(const B* b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs)); }
  static float m(const B*) { return 0; }
};

// One weight block decoded once for all rows of a tile.
struct PreparedBlock {
  __m256i w;    // the 32 integers
  __m256i aux;  // VNNI: -128 * sum(w) per lane; AVX2: |w|
  __m256 dw;    // scale
  __m256 m;     // min (the _1 formats)
};

template <typename Dec>
inline PreparedBlock prepare_block(const typename Dec::B* blk) {
  PreparedBlock pb;
  pb.w = Dec::q(blk);
  pb.dw = _mm256_set1_ps(h2f(blk->d));
  pb.m = Dec::kSigned ? _mm256_setzero_ps() : _mm256_set1_ps(Dec::m(blk));
#if DI_MATMUL_VNNI
  // Activations are stored +128 (unsigned), so sum (a+128)*w - 128*sum(w) = sum a*w, with
  // the correction computed once per weight block for all rows.
  const __m256i zero = _mm256_setzero_si256();
  pb.aux = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, _mm256_set1_epi8(static_cast<char>(0x80)), pb.w));
#else
  pb.aux = _mm256_sign_epi8(pb.w, pb.w);
#endif
  return pb;
}

// One row's block: fp32 lanes of the exact int32 partial dot products, and their scale d_w * d_a.
// Apart so that the tile writes its FMAs explicitly (-ffp-contract=off: the compiler fuses none).
template <typename Dec>
inline __m256 block_int(const PreparedBlock& pb, const ActBlock32& a) {
  const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
#if DI_MATMUL_VNNI
  const __m256i p = _mm256_dpbusd_epi32(pb.aux, av, pb.w);
#else
  const __m256i p = Dec::kSigned ? dot_u8s8(pb.aux, _mm256_sign_epi8(av, pb.w)) : dot_u8s8(pb.w, av);
#endif
  return _mm256_cvtepi32_ps(p);
}

inline __m256 block_scale(const PreparedBlock& pb, const ActBlock32& a) {
  return _mm256_mul_ps(pb.dw, _mm256_broadcast_ss(&a.d));
}

// Blocks go in pairs so the accumulator chain has one add per two blocks: with one row (decode)
// the FMA latency chain, not throughput, would otherwise bound the speed.
template <typename Dec, int R>
void tile_q32(const Tile& t) {
  using B = typename Dec::B;
  const int64_t nb = t.n_in / 32;
  const ActBlock32* act[R];
  for (int r = 0; r < R; ++r) act[r] = reinterpret_cast<const ActBlock32*>(t.act + r * t.act_row_bytes);
  for (int64_t o = t.col_begin; o < t.col_end; ++o) {
    const B* wb = reinterpret_cast<const B*>(t.weight + o * t.weight_row_bytes);
    prefetch_weight_row(t.weight + o * t.weight_row_bytes, t.weight_row_bytes);
    __m256 acc[R], macc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), macc[r] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const PreparedBlock p0 = prepare_block<Dec>(wb + b), p1 = prepare_block<Dec>(wb + b + 1);
      for (int r = 0; r < R; ++r) {
        const ActBlock32 &a0 = act[r][b], &a1 = act[r][b + 1];
        // The FMA GCC used to make here by contraction (kept: int8 outputs stay the same), now
        // the same for every R.
        const __m256 d0 = _mm256_mul_ps(block_int<Dec>(p0, a0), block_scale(p0, a0));
        acc[r] = _mm256_add_ps(acc[r], _mm256_fmadd_ps(block_int<Dec>(p1, a1), block_scale(p1, a1), d0));
        if constexpr (!Dec::kSigned) {
          const __m256 mt = _mm256_mul_ps(p0.m, _mm256_broadcast_ss(&a0.dsum));
          macc[r] = _mm256_add_ps(macc[r], _mm256_fmadd_ps(p1.m, _mm256_broadcast_ss(&a1.dsum), mt));
        }
      }
    }
    if (b < nb) {
      const PreparedBlock p0 = prepare_block<Dec>(wb + b);
      for (int r = 0; r < R; ++r) {
        acc[r] = _mm256_fmadd_ps(block_int<Dec>(p0, act[r][b]), block_scale(p0, act[r][b]), acc[r]);
        if constexpr (!Dec::kSigned)
          macc[r] = _mm256_fmadd_ps(p0.m, _mm256_broadcast_ss(&act[r][b].dsum), macc[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      float m = 0;
      if constexpr (!Dec::kSigned) m = _mm256_cvtss_f32(macc[r]);
      t.out[r * t.out_stride + o] = hsum_ps(acc[r]) + m;
    }
  }
}

// acc += sum over int16 pairs of p16 * s16 (as int32 lanes).
inline __m256i madd_acc_epi16(__m256i acc, __m256i p16, __m256i s16) {
#if DI_MATMUL_VNNI
  return _mm256_dpwssd_epi32(acc, p16, s16);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, s16));
#endif
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Q4_K (kHigh = false) and Q5_K (kHigh = true) against Q8_K activations. Per super-block and
// row: exact int32 lanes for sum(sc * q * a) and sum(m * bsum), scaled into fp32 lanes; the
// lanes are summed once per output. (maddubs cannot saturate: q <= 31.)
template <bool kHigh, int R>
void tile_q45k(const Tile& t) {
  using B = std::conditional_t<kHigh, BlockQ5_K, BlockQ4_K>;
  const int64_t nb = t.n_in / kQKK;
  const BlockQ8_K* act[R];
  for (int r = 0; r < R; ++r) act[r] = reinterpret_cast<const BlockQ8_K*>(t.act + r * t.act_row_bytes);
  const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
  for (int64_t o = t.col_begin; o < t.col_end; ++o) {
    const B* wb = reinterpret_cast<const B*>(t.weight + o * t.weight_row_bytes);
    prefetch_weight_row(t.weight + o * t.weight_row_bytes, t.weight_row_bytes);
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const B& w = wb[b];
      alignas(16) uint8_t sc[8], mn[16];
      for (int j = 0; j < 8; ++j) kquant_scale_min(j, w.scales, &sc[j], &mn[j]);
      const __m128i mn8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
      const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));  // m0,m0,m1,m1,...
      __m256i isum[R];
      for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
      __m256i qh = _mm256_setzero_si256();
      if constexpr (kHigh) qh = load256(w.qh);
      for (int p = 0; p < 4; ++p) {
        const __m256i x = load256(w.qs + 32 * p);
        __m256i w0 = _mm256_and_si256(x, m4), w1 = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
        if constexpr (kHigh) {
          w0 = _mm256_or_si256(w0, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), one), 4));
          w1 = _mm256_or_si256(w1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), one), 4));
        }
        const __m256i s0 = _mm256_set1_epi16(sc[2 * p]), s1 = _mm256_set1_epi16(sc[2 * p + 1]);
        for (int r = 0; r < R; ++r) {
          const int8_t* a = act[r][b].qs + 64 * p;
          isum[r] = madd_acc_epi16(isum[r], _mm256_maddubs_epi16(w0, load256(a)), s0);
          isum[r] = madd_acc_epi16(isum[r], _mm256_maddubs_epi16(w1, load256(a + 32)), s1);
        }
      }
      const __m256 d = _mm256_set1_ps(h2f(w.d)), dmin = _mm256_set1_ps(h2f(w.dmin));
      for (int r = 0; r < R; ++r) {
        const BlockQ8_K& a = act[r][b];
        const __m256 da = _mm256_broadcast_ss(&a.d);
        const __m256i msum = _mm256_madd_epi16(load256(a.bsums), mins16);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(da, d), acc[r]);
        acc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(da, dmin), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) t.out[r * t.out_stride + o] = hsum_ps(acc[r]);
  }
}

template <int R>
void tile_q6k(const Tile& t) {
  const int64_t nb = t.n_in / kQKK;
  const BlockQ8_K* act[R];
  for (int r = 0; r < R; ++r) act[r] = reinterpret_cast<const BlockQ8_K*>(t.act + r * t.act_row_bytes);
  const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
  for (int64_t o = t.col_begin; o < t.col_end; ++o) {
    const BlockQ6_K* wb = reinterpret_cast<const BlockQ6_K*>(t.weight + o * t.weight_row_bytes);
    prefetch_weight_row(t.weight + o * t.weight_row_bytes, t.weight_row_bytes);
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ6_K& w = wb[b];
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales)));
      __m256i isum[R];
      for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load256(w.ql + 64 * h), ql1 = load256(w.ql + 64 * h + 32), qh = load256(w.qh + 32 * h);
        for (int k = 0; k < 4; ++k) {
          const __m256i lo = (k & 1) ? ql1 : ql0;
          const __m256i nib = (k >> 1) ? _mm256_and_si256(_mm256_srli_epi16(lo, 4), m4) : _mm256_and_si256(lo, m4);
          const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m2), 4);
          const __m256i wq = _mm256_or_si256(nib, hi);  // 0..63: maddubs cannot saturate
          const int c = 4 * h + k;  // 32-run c uses scales 2c (first 16) and 2c+1 (last 16)
          const __m256i sv = _mm256_set_m128i(_mm_set1_epi16(w.scales[2 * c + 1]), _mm_set1_epi16(w.scales[2 * c]));
          for (int r = 0; r < R; ++r)
            isum[r] = madd_acc_epi16(isum[r], _mm256_maddubs_epi16(wq, load256(act[r][b].qs + 32 * c)), sv);
        }
      }
      const __m256 d = _mm256_set1_ps(h2f(w.d));
      for (int r = 0; r < R; ++r) {
        const BlockQ8_K& a = act[r][b];
        // Stored values are offset by 32: subtract 32 * sum(sc * bsum) in integers.
        const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(load256(a.bsums), sc16), 5);
        const __m256i is = _mm256_sub_epi32(isum[r], off);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(_mm256_broadcast_ss(&a.d), d), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) t.out[r * t.out_stride + o] = hsum_ps(acc[r]);
  }
}

// Float weights: 8 elements per step as fp32.
struct LoadF32 {
  static __m256 at(const uint8_t* w, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i); }
  static float one(const uint8_t* w, int64_t i) { return reinterpret_cast<const float*>(w)[i]; }
};
struct LoadF16 {
  static __m256 at(const uint8_t* w, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
  }
  static float one(const uint8_t* w, int64_t i) { return h2f(reinterpret_cast<const uint16_t*>(w)[i]); }
};
struct LoadBF16 {
  static __m256 at(const uint8_t* w, int64_t i) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static float one(const uint8_t* w, int64_t i) { return bf16_to_f32(reinterpret_cast<const uint16_t*>(w)[i]); }
};

// R rows x C columns of float weights as an outer-product register tile: per 8-element step,
// C weight loads and R activation loads feed R*C FMAs. Every (row, column) accumulator sees the
// same sequence of FMAs whatever R and C are, so results stay batch-invariant.
template <typename Load, int R, int C>
void float_block(const Tile& t, const float* const* x, int64_t o) {
  const int64_t n = t.n_in;
  const uint8_t* w[C];
  for (int c = 0; c < C; ++c) w[c] = t.weight + (o + c) * t.weight_row_bytes;
  prefetch_weight_row(w[0], C * t.weight_row_bytes);
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = Load::at(w[c], i);
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x[r] + i);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float s = hsum_ps(acc[r][c]);
      // Explicit FMA: left to the compiler, contraction of the tail may differ between the
      // R x C instances and break batch invariance (the tests caught exactly that).
      for (int64_t j = i; j < n; ++j) s = std::fma(Load::one(w[c], j), x[r][j], s);
      t.out[r * t.out_stride + o + c] = s;
    }
}

template <typename Load, int R>
void tile_float(const Tile& t) {
#if DI_MATMUL_VNNI
  constexpr int kCols = 3;  // 8 x 3 accumulators fit AVX-512's 32 registers
#else
  constexpr int kCols = 2;  // 4 x 2 fit AVX2's 16
#endif
  const float* x[R];
  for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const float*>(t.act + r * t.act_row_bytes);
  int64_t o = t.col_begin;
  for (; o + kCols <= t.col_end; o += kCols) float_block<Load, R, kCols>(t, x, o);
  for (; o < t.col_end; ++o) float_block<Load, R, 1>(t, x, o);
}

#include "deepinfer/kernels/cpu/matmul_high_simd_impl.h"

template <int R>
void tile_rows(const Tile& t) {
  if (t.high && act_kind(t.type) != ActKind::kFloat) return tile_rows_high<R>(t);
  switch (t.type) {
    case DType::kF32: return tile_float<LoadF32, R>(t);
    case DType::kF16: return tile_float<LoadF16, R>(t);
    case DType::kBF16: return tile_float<LoadBF16, R>(t);
    case DType::kQ4_0: return tile_q32<DecQ4_0, R>(t);
    case DType::kQ4_1: return tile_q32<DecQ4_1, R>(t);
    case DType::kQ5_0: return tile_q32<DecQ5_0, R>(t);
    case DType::kQ5_1: return tile_q32<DecQ5_1, R>(t);
    case DType::kQ8_0: return tile_q32<DecQ8_0, R>(t);
    case DType::kQ4_K: return tile_q45k<false, R>(t);
    case DType::kQ5_K: return tile_q45k<true, R>(t);
    case DType::kQ6_K: return tile_q6k<R>(t);
    default: DI_CHECK(false, "matmul tile: unsupported weight type {}", dtype_name(t.type));
  }
}

inline void compute_tile_simd(const Tile& t) {
  static_assert(matmul_detail::kMaxTileRows == 8 && matmul_detail::kAvx2TileRows == 4);
  switch (t.rows) {
    case 1: return tile_rows<1>(t);
    case 2: return tile_rows<2>(t);
    case 3: return tile_rows<3>(t);
    case 4: return tile_rows<4>(t);
#if DI_MATMUL_VNNI
    case 5: return tile_rows<5>(t);
    case 6: return tile_rows<6>(t);
    case 7: return tile_rows<7>(t);
    case 8: return tile_rows<8>(t);
#endif
    default: DI_CHECK(false, "matmul tile: {} rows", t.rows);
  }
}
