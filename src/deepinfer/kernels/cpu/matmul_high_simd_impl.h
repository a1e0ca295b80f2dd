// kHigh SIMD tiles (see matmul_high_tile.h for the order they must follow), included by
// matmul_simd_impl.h so both ISA builds get them: each 32-element weight chunk is decoded to
// 4 fp32 vectors once per tile and FMA'd into every row's two accumulators.

// Chunk c of a weight row: 32 signed byte integers and the scales/min of matmul_high_tile.h.
template <DType T>
inline __m256i high_chunk(const uint8_t* row, int64_t c, float* d0, float* d1, float* m) {
  *m = 0;
  __m256i q;
  if constexpr (T == DType::kQ4_0) {
    const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[c];
    *d0 = h2f(b.d);
    q = DecQ4_0::q(&b);
  } else if constexpr (T == DType::kQ4_1) {
    const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[c];
    *d0 = h2f(b.d), *m = h2f(b.m);
    q = DecQ4_1::q(&b);
  } else if constexpr (T == DType::kQ5_0) {
    const auto& b = reinterpret_cast<const BlockQ5_0*>(row)[c];
    *d0 = h2f(b.d);
    q = DecQ5_0::q(&b);
  } else if constexpr (T == DType::kQ5_1) {
    const auto& b = reinterpret_cast<const BlockQ5_1*>(row)[c];
    *d0 = h2f(b.d), *m = h2f(b.m);
    q = DecQ5_1::q(&b);
  } else if constexpr (T == DType::kQ8_0) {
    const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[c];
    *d0 = h2f(b.d);
    q = DecQ8_0::q(&b);
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    using B = std::conditional_t<T == DType::kQ5_K, BlockQ5_K, BlockQ4_K>;
    const B& k = reinterpret_cast<const B*>(row)[c / 8];
    const int j = static_cast<int>(c % 8);
    uint8_t sc, mn;
    kquant_scale_min(j, k.scales, &sc, &mn);
    *d0 = h2f(k.d) * static_cast<float>(sc), *m = -(h2f(k.dmin) * static_cast<float>(mn));
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.qs + 32 * (j / 2)));
    q = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(x, 4) : x, _mm256_set1_epi8(0xF));
    if constexpr (T == DType::kQ5_K) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.qh));
      const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(qh, j), _mm256_set1_epi8(1));
      q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 4));
    }
  } else {
    static_assert(T == DType::kQ6_K);
    const BlockQ6_K& k = reinterpret_cast<const BlockQ6_K*>(row)[c / 8];
    const int ci = static_cast<int>(c % 8), half = ci / 4, t = ci % 4;
    const float d = h2f(k.d);
    *d0 = d * static_cast<float>(k.scales[2 * ci]);
    *d1 = d * static_cast<float>(k.scales[2 * ci + 1]);
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.ql + 64 * half + 32 * (t & 1)));
    const __m256i nib = _mm256_and_si256(t >> 1 ? _mm256_srli_epi16(lo, 4) : lo, _mm256_set1_epi8(0xF));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.qh + 32 * half));
    const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * t), _mm256_set1_epi8(3)), 4);
    return _mm256_sub_epi8(_mm256_or_si256(nib, hi), _mm256_set1_epi8(32));
  }
  *d1 = *d0;
  return q;
}

#if defined(__AVX512F__)
// AVX-512: one 16-lane accumulator per row holds acc[0..15] of matmul_high_tile.h (the AVX2
// code's two 8-lane halves side by side), so a chunk is two 16-element weight vectors and two
// FMAs per row, each lane doing the AVX2 lane's operations in the same order: bitwise the same
// result with about half the instructions (batch-1 decode is bound by them, not by memory).
// Chunk c's elements 0..15 (scale d0) and 16..31 (scale d1) as fp32.
template <DType T>
inline void high_chunk_512(const uint8_t* row, int64_t c, __m512* w_lo, __m512* w_hi) {
  if constexpr (T == DType::kQ4_0 || T == DType::kQ4_1) {
    // A 4-bit chunk has only 16 distinct weights: compute them once, w(k) = fma(d, k, m) (k - 8
    // and m = 0 for Q4_0), and look each element's up by its nibble (vpermps reads the low 4
    // bits of each lane, so the high nibbles only need a shift). Same values as decoding every
    // element, fewer instructions.
    using B = std::conditional_t<T == DType::kQ4_1, BlockQ4_1, BlockQ4_0>;
    const B& b = reinterpret_cast<const B*>(row)[c];
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
    __m512 table;
    if constexpr (T == DType::kQ4_1) {
      const __m512 dm = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(
          load_u32(reinterpret_cast<const uint8_t*>(&b.d))))));
      const __m512 k = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
      table = _mm512_fmadd_ps(_mm512_broadcastss_ps(_mm512_castps512_ps128(dm)), k,
                              _mm512_permutexvar_ps(_mm512_set1_epi32(1), dm));
    } else {
      const __m512 k = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
      table = _mm512_fmadd_ps(_mm512_set1_ps(h2f(b.d)), k, _mm512_setzero_ps());
    }
    *w_lo = _mm512_permutexvar_ps(bytes, table);
    *w_hi = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
  } else if constexpr (T == DType::kQ4_K) {
    // The same lookup: a Q4_K chunk (one 32-element sub-block) has one scale and one min.
    const BlockQ4_K& k = reinterpret_cast<const BlockQ4_K*>(row)[c / 8];
    const int j = static_cast<int>(c % 8);
    uint8_t sc, mn;
    kquant_scale_min(j, k.scales, &sc, &mn);
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 table = _mm512_fmadd_ps(_mm512_set1_ps(h2f(k.d) * static_cast<float>(sc)), iota,
                                         _mm512_set1_ps(-(h2f(k.dmin) * static_cast<float>(mn))));
    const uint8_t* qs = k.qs + 32 * (j / 2);
    const int shift = j % 2 ? 4 : 0;
    *w_lo = _mm512_permutexvar_ps(_mm512_srli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))), shift), table);
    *w_hi = _mm512_permutexvar_ps(_mm512_srli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16))), shift), table);
  } else if constexpr (T == DType::kQ8_0) {
    // The bytes sign-extended straight from memory; the scale converted already broadcast.
    const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[c];
    const __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(b.d))), zero = _mm512_setzero_ps();
    *w_lo = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)))), zero);
    *w_hi = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)))), zero);
  } else {
    float d0, d1, mn;
    const __m256i q = high_chunk<T>(row, c, &d0, &d1, &mn);
    const __m512 vm = _mm512_set1_ps(mn);
    *w_lo = _mm512_fmadd_ps(_mm512_set1_ps(d0), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))), vm);
    *w_hi = _mm512_fmadd_ps(_mm512_set1_ps(d1), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))), vm);
  }
}

template <DType T, int R>
void tile_high(const Tile& t) {
  const int64_t nc = t.n_in / 32;
  const float* x[R];
  for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const float*>(t.act + r * t.act_row_bytes);
  for (int64_t o = t.col_begin; o < t.col_end; ++o) {
    const uint8_t* row = t.weight + o * t.weight_row_bytes;
    const uint8_t* ahead = row + kWeightPrefetchBytes;
    const size_t chunk_bytes = t.weight_row_bytes / static_cast<size_t>(nc);
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < nc; ++c) {
      prefetch_l1(ahead + static_cast<size_t>(c) * chunk_bytes);  // spread over the row, not a burst
      __m512 w_lo, w_hi;
      high_chunk_512<T>(row, c, &w_lo, &w_hi);
      for (int r = 0; r < R; ++r) {
        const float* xc = x[r] + 32 * c;
        acc[r] = _mm512_fmadd_ps(w_lo, _mm512_loadu_ps(xc), acc[r]);
        acc[r] = _mm512_fmadd_ps(w_hi, _mm512_loadu_ps(xc + 16), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 halves = _mm256_add_ps(_mm512_castps512_ps256(acc[r]),
                                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r]), 1)));
      t.out[r * t.out_stride + o] = hsum_ps(halves);
    }
  }
}
#else
// Chunk c's elements 0..7, 8..15 (scale d0), 16..23 and 24..31 (scale d1) as fp32, each
// w = fma(d, float(q), m) as matmul_high_tile.h orders it. Q4_0/Q4_1 and Q8_0 take their bytes
// straight to 32-bit lanes (fewer instructions than the generic byte decode, same values).
template <DType T>
inline void high_chunk_256(const uint8_t* row, int64_t c, __m256* w0, __m256* w1, __m256* w2, __m256* w3) {
  if constexpr (T == DType::kQ4_0 || T == DType::kQ4_1) {
    using B = std::conditional_t<T == DType::kQ4_1, BlockQ4_1, BlockQ4_0>;
    const B& b = reinterpret_cast<const B*>(row)[c];
    const __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs)));
    const __m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8)));
    const __m256i low = _mm256_set1_epi32(0xF);
    __m256i q0 = _mm256_and_si256(b0, low), q1 = _mm256_and_si256(b1, low);
    __m256i q2 = _mm256_srli_epi32(b0, 4), q3 = _mm256_srli_epi32(b1, 4);
    __m256 d, m;
    if constexpr (T == DType::kQ4_1) {
      const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(&b.d)))));
      d = _mm256_broadcastss_ps(dm), m = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
    } else {
      d = _mm256_set1_ps(h2f(b.d)), m = _mm256_setzero_ps();
      const __m256i eight = _mm256_set1_epi32(8);
      q0 = _mm256_sub_epi32(q0, eight), q1 = _mm256_sub_epi32(q1, eight);
      q2 = _mm256_sub_epi32(q2, eight), q3 = _mm256_sub_epi32(q3, eight);
    }
    *w0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q0), m);
    *w1 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q1), m);
    *w2 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q2), m);
    *w3 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q3), m);
  } else if constexpr (T == DType::kQ8_0) {
    const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[c];
    const __m256 d = _mm256_set1_ps(h2f(b.d)), zero = _mm256_setzero_ps();
    __m256* w[4] = {w0, w1, w2, w3};
    for (int k = 0; k < 4; ++k)
      *w[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)))), zero);
  } else {
    float d0, d1, mn;
    const __m256i q = high_chunk<T>(row, c, &d0, &d1, &mn);
    const __m128i qlo = _mm256_castsi256_si128(q), qhi = _mm256_extracti128_si256(q, 1);
    const __m256 vd0 = _mm256_set1_ps(d0), vd1 = _mm256_set1_ps(d1), vm = _mm256_set1_ps(mn);
    *w0 = _mm256_fmadd_ps(vd0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(qlo)), vm);
    *w1 = _mm256_fmadd_ps(vd0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(qlo, 8))), vm);
    *w2 = _mm256_fmadd_ps(vd1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(qhi)), vm);
    *w3 = _mm256_fmadd_ps(vd1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(qhi, 8))), vm);
  }
}

template <DType T, int R>
void tile_high(const Tile& t) {
  const int64_t nc = t.n_in / 32;
  const float* x[R];
  for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const float*>(t.act + r * t.act_row_bytes);
  for (int64_t o = t.col_begin; o < t.col_end; ++o) {
    const uint8_t* row = t.weight + o * t.weight_row_bytes;
    prefetch_weight_row(row, t.weight_row_bytes);
    __m256 acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = _mm256_setzero_ps(), acc1[r] = _mm256_setzero_ps();
    for (int64_t c = 0; c < nc; ++c) {
      __m256 w0, w1, w2, w3;
      high_chunk_256<T>(row, c, &w0, &w1, &w2, &w3);
      for (int r = 0; r < R; ++r) {
        const float* xc = x[r] + 32 * c;
        acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xc), acc0[r]);
        acc1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xc + 8), acc1[r]);
        acc0[r] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xc + 16), acc0[r]);
        acc1[r] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xc + 24), acc1[r]);
      }
    }
    for (int r = 0; r < R; ++r) t.out[r * t.out_stride + o] = hsum_ps(_mm256_add_ps(acc0[r], acc1[r]));
  }
}

#endif  // __AVX512F__

template <int R>
void tile_rows_high(const Tile& t) {
  switch (t.type) {
    case DType::kQ4_0: return tile_high<DType::kQ4_0, R>(t);
    case DType::kQ4_1: return tile_high<DType::kQ4_1, R>(t);
    case DType::kQ5_0: return tile_high<DType::kQ5_0, R>(t);
    case DType::kQ5_1: return tile_high<DType::kQ5_1, R>(t);
    case DType::kQ8_0: return tile_high<DType::kQ8_0, R>(t);
    case DType::kQ4_K: return tile_high<DType::kQ4_K, R>(t);
    case DType::kQ5_K: return tile_high<DType::kQ5_K, R>(t);
    case DType::kQ6_K: return tile_high<DType::kQ6_K, R>(t);
    default: DI_CHECK(false, "matmul kHigh tile: unsupported weight type {}", dtype_name(t.type));
  }
}
