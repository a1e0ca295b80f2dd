// Paged attention: work split, online softmax over fixed key chunks and segments, merging of
// split rows. Per-ISA loops: attention_avx2/avx512.cc; scalar ones, the reference and the K/V
// cache writer: attention_scalar.cc.
#include "deepinfer/kernels/cpu/attention.h"
#include "deepinfer/kernels/cpu/attention_common.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/kernels/cpu/prefetch.h"

namespace deepinfer::kernels {
namespace {

using detail::check_params;
using detail::elem_bytes;
using detail::key_range;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kTargetRowsPerItem = 32;  // (token, head) rows that share one pass over K/V

// Rows of an item: kv heads [kv_head, kv_head + n_kv) x tokens [tok_begin, tok_end) x the
// query heads of each kv head's group, kv-head-major. Decode items take every kv head of a
// sequence so that a step streams each block's contiguous K/V rows once.
struct WorkItem {
  int32_t seq, kv_head, n_kv, tok_begin, tok_end;
  int64_t cost;
  int64_t key_lo = 0, key_hi = std::numeric_limits<int64_t>::max();  // keys this piece covers
  int64_t partial = -1;  // -1: write the output; else offset of this piece's partial states
};

struct RowState {
  const float* q;
  float* out;
  int64_t lo, hi;  // keys of this row within the piece
  float m, l;      // current segment's max and sum
  float tm, tl;    // merged total over finished segments
};

// Folds a segment state (m, l, acc) into a total (tm, tl, total). Merging into an empty total
// copies exactly (factor 0 for the old part, exp(0) = 1 for the new), which is what makes a
// split computation bit-identical to an unsplit one.
inline void merge_state(float m, float l, const float* acc, float& tm, float& tl, float* total, int n) {
  if (m == kNegInf) return;  // the segment had no keys for this row
  const float nm = std::max(tm, m);
  const float fo = tm == kNegInf ? 0.0f : std::exp(tm - nm);
  const float fs = std::exp(m - nm);
  for (int d = 0; d < n; ++d) total[d] = total[d] * fo + acc[d] * fs;
  tl = tl * fo + l * fs;
  tm = nm;
}

// max(init, s[0..n)) in four independent chains (one chain is a latency-bound loop). The max
// is exact, so the order can only change the sign of a zero result, which no later use sees
// (it only enters exp(x - m) and max again).
inline float range_max(const float* s, int64_t n, float init) {
  float m0 = init, m1 = init, m2 = init, m3 = init;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    m0 = std::max(m0, s[i]);
    m1 = std::max(m1, s[i + 1]);
    m2 = std::max(m2, s[i + 2]);
    m3 = std::max(m3, s[i + 3]);
  }
  for (; i < n; ++i) m0 = std::max(m0, s[i]);
  return std::max(std::max(m0, m1), std::max(m2, m3));
}

inline void write_output(float tl, const float* total, float* out, int n) {
  const float inv = tl > 0.0f ? 1.0f / tl : 0.0f;
  for (int d = 0; d < n; ++d) out[d] = total[d] * inv;
}

inline int rows_per_kv_head(const AttentionParams& p, const WorkItem& w) {
  return (w.tok_end - w.tok_begin) * (p.n_heads / p.n_kv_heads);
}

// Query and output pointers of row r of an item (per kv head: token-major, heads of the group
// minor).
inline void row_ptrs(const AttentionParams& p, const WorkItem& w, int r, const float** q, float** out) {
  const int group = p.n_heads / p.n_kv_heads;
  const int per_kv = rows_per_kv_head(p, w);
  const int g = w.kv_head + r / per_kv, rr = r % per_kv;
  const int64_t row = p.seqs[w.seq].token_start + w.tok_begin + rr / group;
  const int h = g * group + rr % group;
  *q = p.q + row * p.q_stride + static_cast<int64_t>(h) * p.head_dim;
  *out = p.out + row * p.out_stride + static_cast<int64_t>(h) * p.v_head_dim;
}

struct Scratch {
  std::vector<RowState> rows;
  std::vector<float> scores;  // [rows, kAttentionKeyChunk]
  std::vector<float> acc;     // [rows, v_head_dim] current segment
  std::vector<float> total;   // [rows, v_head_dim] merged finished segments
  std::vector<const void*> kptr;  // [kAttentionKeyChunk] K rows of the current chunk
  std::vector<const void*> vptr;  // [kAttentionKeyChunk] V rows of the current chunk
  std::vector<int64_t> tok;       // [kAttentionKeyChunk] byte offsets of the chunk's token rows
  std::vector<int64_t> tok_next;  // [kAttentionKeyChunk] the next chunk's
};

// Byte offsets of the token rows of keys [c0, c1] (kv head 0), walking the block table once
// per block rather than dividing per key.
void token_offsets(const AttentionParams& p, const AttentionSeq& s, int64_t c0, int64_t c1, int64_t* off) {
  const int64_t kb = static_cast<int64_t>(elem_bytes(p.kv_type));
  int64_t blk = c0 / p.block_size, slot = c0 % p.block_size;
  int64_t base = s.block_table[blk] * p.block_stride;
  for (int64_t key = c0; key <= c1; ++key) {
    off[key - c0] = (base + slot * p.token_stride) * kb;
    if (++slot == p.block_size && key < c1) {
      slot = 0;
      base = s.block_table[++blk] * p.block_stride;
    }
  }
}

// Cache rows for the hardware to fetch while a chunk computes: the item's kv heads of the
// K and V rows of n keys (byte offsets tok). Decode attention reads every byte once, and with
// blocks scattered over the pool the prefetchers of the core start late on each of them, so
// the next chunk's K and V are requested, into L2, while the current one computes. The
// requests go to the chunk's blocks in turn, one token row of each at a time: K and V of a
// 64-key chunk are 8 separate runs of memory, and walking them side by side rather than one
// after the other keeps more of them in flight; and they are spread over the chunk's compute
// in pieces (below) rather than issued all at once, which stalls the core on a full load
// queue. Both measured (batch 16, scattered blocks, 1 thread): -13% and -15% of the time.
// Prefetches change no result.
struct PrefetchChunk {
  const char* k = nullptr;  // K cache + first kv head's offset
  const char* v = nullptr;  // V cache + first kv head's offset
  const int64_t* tok = nullptr;  // [n]
  int n = 0;
  int64_t k_bytes = 0, v_bytes = 0;  // per token row
  int block_size = 1;
};

// Share `piece` of `pieces` of the requests (all of them by default).
void prefetch_chunk(const PrefetchChunk& pf, int piece = 0, int pieces = 1) {
  const int stride = std::max(1, std::min(pf.block_size, pf.n));
  for (int t = stride * piece / pieces, end = stride * (piece + 1) / pieces; t < end; ++t)
    for (int j = t; j < pf.n; j += stride) {
      prefetch_range<prefetch_l2>(pf.k + pf.tok[j], static_cast<size_t>(pf.k_bytes));
      prefetch_range<prefetch_l2>(pf.v + pf.tok[j], static_cast<size_t>(pf.v_bytes));
    }
}

// Keys per call of the ops: a chunk's keys go in pieces so that the next chunk's prefetches
// can be spread between them. Splitting changes no bits: scores are per key, and the V sum's
// accumulators pass through memory unchanged between calls.
constexpr int kPieceKeys = 32;

// One phase of a chunk (scores: sc.kptr, or V sum: sc.vptr): rows of one kv head go to `op`
// kAttentionOpRows at a time, so the chunk's K (V) rows are loaded once per group of rows;
// before each piece of keys comes its share of next's prefetches (phase 0 or 1 of 2).
template <typename Op>
void chunk_phase(const WorkItem& w, int per_kv, int nk, const PrefetchChunk& next, int phase, Op op) {
  const int ns = (nk + kPieceKeys - 1) / kPieceKeys;
  for (int g = 0; g < w.n_kv; ++g)
    for (int i = 0; i < ns; ++i) {
      prefetch_chunk(next, (phase * w.n_kv + g) * ns + i, 2 * w.n_kv * ns);
      const int j0 = i * kPieceKeys, nj = std::min(kPieceKeys, nk - j0);
      for (int r = g * per_kv, end = (g + 1) * per_kv; r < end; r += detail::kAttentionOpRows)
        op(g, r, std::min(detail::kAttentionOpRows, end - r), j0, nj);
    }
}

// sc.tok holds the chunk's token row offsets; scores of key j go to column first + j.
void score_chunk(const AttentionParams& p, const detail::AttentionOps& ops, const WorkItem& w, Scratch& sc,
                 int first, int nk, const PrefetchChunk& next) {
  const int64_t kb = static_cast<int64_t>(elem_bytes(p.kv_type));
  chunk_phase(w, rows_per_kv_head(p, w), nk, next, 0, [&](int g, int r, int nq, int j0, int nj) {
    if (j0 == 0) {
      const char* kh = static_cast<const char*>(p.k_cache) + int64_t{w.kv_head + g} * p.head_dim * kb;
      for (int j = 0; j < nk; ++j) sc.kptr[j] = kh + sc.tok[j];
    }
    const float* qs[detail::kAttentionOpRows];
    float* outs[detail::kAttentionOpRows];
    for (int j = 0; j < nq; ++j) {
      qs[j] = sc.rows[r + j].q;
      outs[j] = sc.scores.data() + static_cast<size_t>(r + j) * kAttentionKeyChunk + first + j0;
    }
    ops.qk_rows(qs, nq, sc.kptr.data() + j0, nj, p.head_dim, p.scale, outs);
  });
}

void accumulate_chunk(const AttentionParams& p, const detail::AttentionOps& ops, const WorkItem& w, Scratch& sc,
                      int first, int nk, const PrefetchChunk& next) {
  const int64_t kb = static_cast<int64_t>(elem_bytes(p.kv_type));
  chunk_phase(w, rows_per_kv_head(p, w), nk, next, 1, [&](int g, int r, int nr, int j0, int nj) {
    if (j0 == 0) {
      const char* vh = static_cast<const char*>(p.v_cache) + int64_t{w.kv_head + g} * p.v_head_dim * kb;
      for (int j = 0; j < nk; ++j) sc.vptr[j] = vh + sc.tok[j];
    }
    float* accs[detail::kAttentionOpRows];
    const float* ws[detail::kAttentionOpRows];
    for (int j = 0; j < nr; ++j) {
      accs[j] = sc.acc.data() + static_cast<size_t>(r + j) * p.v_head_dim;
      ws[j] = sc.scores.data() + static_cast<size_t>(r + j) * kAttentionKeyChunk + first + j0;
    }
    ops.pv_rows(accs, ws, nr, sc.vptr.data() + j0, nj, p.v_head_dim);
  });
}

void run_item(const AttentionParams& p, const detail::AttentionOps& ops, const WorkItem& w, Scratch& sc,
              float* partials) {
  const AttentionSeq& s = p.seqs[w.seq];
  const int group = p.n_heads / p.n_kv_heads;
  const int per_kv = rows_per_kv_head(p, w);
  const int n_rows = per_kv * w.n_kv;
  const int vd = p.v_head_dim;
  sc.rows.resize(n_rows);
  sc.scores.resize(static_cast<size_t>(n_rows) * kAttentionKeyChunk);
  sc.acc.assign(static_cast<size_t>(n_rows) * vd, 0.0f);
  sc.total.assign(static_cast<size_t>(n_rows) * vd, 0.0f);
  sc.kptr.resize(kAttentionKeyChunk);
  sc.vptr.resize(kAttentionKeyChunk);
  sc.tok.resize(kAttentionKeyChunk);
  sc.tok_next.resize(kAttentionKeyChunk);
  int64_t lo_all = std::numeric_limits<int64_t>::max(), hi_all = -1;
  for (int r = 0; r < n_rows; ++r) {
    RowState& st = sc.rows[r];
    row_ptrs(p, w, r, &st.q, &st.out);
    key_range(p, s.first_pos + w.tok_begin + (r % per_kv) / group, &st.lo, &st.hi);
    st.lo = std::max(st.lo, w.key_lo);
    st.hi = std::min(st.hi, w.key_hi);
    st.m = st.tm = kNegInf;
    st.l = st.tl = 0.0f;
    if (st.lo > st.hi) continue;
    lo_all = std::min(lo_all, st.lo);
    hi_all = std::max(hi_all, st.hi);
  }
  auto finish_segment = [&] {
    for (int r = 0; r < n_rows; ++r) {
      RowState& st = sc.rows[r];
      float* acc = sc.acc.data() + static_cast<size_t>(r) * vd;
      merge_state(st.m, st.l, acc, st.tm, st.tl, sc.total.data() + static_cast<size_t>(r) * vd, vd);
      st.m = kNegInf;
      st.l = 0.0f;
      std::fill(acc, acc + vd, 0.0f);
    }
  };
  const int64_t kb = static_cast<int64_t>(elem_bytes(p.kv_type));
  const char* k_heads = static_cast<const char*>(p.k_cache) + int64_t{w.kv_head} * p.head_dim * kb;
  const char* v_heads = static_cast<const char*>(p.v_cache) + int64_t{w.kv_head} * p.v_head_dim * kb;
  const int64_t k_row = int64_t{w.n_kv} * p.head_dim * kb, v_row = int64_t{w.n_kv} * p.v_head_dim * kb;
  const int64_t first_chunk = hi_all >= 0 ? lo_all / kAttentionKeyChunk : 0;
  const int64_t last_chunk = hi_all >= 0 ? hi_all / kAttentionKeyChunk : -1;
  if (first_chunk <= last_chunk)
    token_offsets(p, s, lo_all, std::min(first_chunk * kAttentionKeyChunk + kAttentionKeyChunk - 1, hi_all),
                  sc.tok.data());
  for (int64_t c = first_chunk; c <= last_chunk; ++c) {
    const int64_t base = c * kAttentionKeyChunk;
    if (c > first_chunk && base % kAttentionKeySegment == 0) finish_segment();
    const int64_t c0 = std::max(base, lo_all), c1 = std::min(base + kAttentionKeyChunk - 1, hi_all);
    const int nk = static_cast<int>(c1 - c0 + 1);
    // sc.tok holds keys [c0, c1]; the next chunk's go to sc.tok_next.
    const int64_t n0 = base + kAttentionKeyChunk, n1 = std::min(n0 + kAttentionKeyChunk - 1, hi_all);
    const int n_next = c < last_chunk ? static_cast<int>(n1 - n0 + 1) : 0;
    if (n_next > 0) token_offsets(p, s, n0, n1, sc.tok_next.data());
    // Scores for every row of the item against every key of the chunk (keys outside a row's
    // range are valid cache entries; their scores are simply not used).
    if (c == first_chunk) prefetch_chunk({k_heads, v_heads, sc.tok.data(), nk, k_row, v_row, p.block_size});
    const PrefetchChunk next{k_heads, v_heads, sc.tok_next.data(), n_next, k_row, v_row, p.block_size};
    score_chunk(p, ops, w, sc, static_cast<int>(c0 - base), nk, next);
    // Online softmax update per row, over its own part of the chunk in ascending key order.
    // Keys of the chunk outside the row's range get weight 0 (adding 0 * v leaves acc as is).
    for (int r = 0; r < n_rows; ++r) {
      RowState& st = sc.rows[r];
      const int64_t a = std::max(c0, st.lo), b = std::min(c1, st.hi);
      float* sr = sc.scores.data() + r * kAttentionKeyChunk - base;
      if (a > b) {
        std::fill(sr + c0, sr + c1 + 1, 0.0f);
        continue;
      }
      const float mc = range_max(sr + a, b - a + 1, st.m);
      if (mc > st.m) {
        const float f = st.m == kNegInf ? 0.0f : std::exp(st.m - mc);
        float* acc = sc.acc.data() + static_cast<size_t>(r) * p.v_head_dim;
        for (int d = 0; d < p.v_head_dim; ++d) acc[d] *= f;
        st.l *= f;
        st.m = mc;
      }
      st.l += ops.exp_sum(sr + a, static_cast<int>(b - a + 1), st.m);
      std::fill(sr + c0, sr + a, 0.0f);
      std::fill(sr + b + 1, sr + c1 + 1, 0.0f);
    }
    // Weighted V sum: each V row of the chunk is read once per group of rows.
    accumulate_chunk(p, ops, w, sc, static_cast<int>(c0 - base), nk, next);
    std::swap(sc.tok, sc.tok_next);
  }
  finish_segment();
  for (int r = 0; r < n_rows; ++r) {
    const RowState& st = sc.rows[r];
    const float* total = sc.total.data() + static_cast<size_t>(r) * vd;
    if (w.partial < 0) {
      write_output(st.tl, total, st.out, vd);
    } else {
      float* dst = partials + w.partial + static_cast<int64_t>(r) * (vd + 2);
      dst[0] = st.tm;
      dst[1] = st.tl;
      std::copy(total, total + vd, dst + 2);
    }
  }
}

// One item per (sequence, tile of tokens, kv head); with merge_kv_heads, a tile of at most
// kTargetRowsPerItem query rows (decode) takes all kv heads at once. Which rows share an
// item never changes a row's arithmetic.
std::vector<WorkItem> work_items(const AttentionParams& p, bool merge_kv_heads) {
  const int group = p.n_heads / p.n_kv_heads;
  const int tile = std::max(1, kTargetRowsPerItem / group);
  std::vector<WorkItem> items;
  for (int s = 0; s < p.n_seqs; ++s) {
    const AttentionSeq& sq = p.seqs[s];
    for (int t0 = 0; t0 < sq.n_tokens; t0 += tile) {
      const int t1 = std::min(sq.n_tokens, t0 + tile);
      int64_t keys = 0;
      for (int t = t0; t < t1; ++t) {
        int64_t lo, hi;
        key_range(p, sq.first_pos + t, &lo, &hi);
        keys += hi - lo + 1;
      }
      if (merge_kv_heads && (t1 - t0) * p.n_heads <= kTargetRowsPerItem) {
        items.push_back({s, 0, p.n_kv_heads, t0, t1, keys * p.n_kv_heads});
        continue;
      }
      for (int g = 0; g < p.n_kv_heads; ++g) items.push_back({s, g, 1, t0, t1, keys});
    }
  }
  return items;
}

}  // namespace

void attention_with_isa(const AttentionParams& p, ThreadPool& pool, IsaLevel isa) {
  check_params(p);
  const detail::AttentionOps ops = isa >= IsaLevel::kAvx512 ? detail::attention_ops_avx512(p.kv_type)
                                   : isa >= IsaLevel::kAvx2 ? detail::attention_ops_avx2(p.kv_type)
                                                            : detail::attention_ops_scalar(p.kv_type);
  std::vector<WorkItem> items = work_items(p, /*merge_kv_heads=*/true);
  if (items.size() < static_cast<size_t>(4 * pool.num_threads())) items = work_items(p, false);
  // Too few items to keep every thread busy: split items that span several key segments into
  // one piece per segment; a serial pass merges the pieces in segment order afterwards.
  struct Split {
    WorkItem item;
    std::vector<int64_t> pieces;  // partial offsets in segment order
  };
  std::vector<Split> splits;
  std::vector<float> partials;
  if (items.size() < static_cast<size_t>(2 * pool.num_threads())) {
    std::vector<WorkItem> pieces;
    int64_t offset = 0;
    for (const WorkItem& w : items) {
      const AttentionSeq& sq = p.seqs[w.seq];
      int64_t lo, hi, lo_last, hi_last;
      key_range(p, sq.first_pos + w.tok_begin, &lo, &hi);
      key_range(p, sq.first_pos + w.tok_end - 1, &lo_last, &hi_last);
      const int64_t s0 = lo / kAttentionKeySegment, s1 = hi_last / kAttentionKeySegment;
      if (s1 == s0) {
        pieces.push_back(w);
        continue;
      }
      Split sp{w, {}};
      const int n_rows = rows_per_kv_head(p, w) * w.n_kv;
      for (int64_t sg = s0; sg <= s1; ++sg) {
        WorkItem piece = w;
        piece.key_lo = sg * kAttentionKeySegment;
        piece.key_hi = piece.key_lo + kAttentionKeySegment - 1;
        piece.cost = w.cost / (s1 - s0 + 1);
        piece.partial = offset;
        sp.pieces.push_back(offset);
        offset += static_cast<int64_t>(n_rows) * (p.v_head_dim + 2);
        pieces.push_back(piece);
      }
      splits.push_back(std::move(sp));
    }
    items = std::move(pieces);
    partials.resize(offset);
  }
  // Heaviest first so the dynamic hand-out ends balanced; order never affects results.
  std::stable_sort(items.begin(), items.end(), [](const WorkItem& a, const WorkItem& b) { return a.cost > b.cost; });
  std::atomic<size_t> next{0};
  pool.run([&](int, int) {
    thread_local Scratch scratch;
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < items.size();)
      run_item(p, ops, items[i], scratch, partials.data());
  });
  std::vector<float> total(p.v_head_dim);
  for (const Split& sp : splits) {
    const int n_rows = rows_per_kv_head(p, sp.item) * sp.item.n_kv;
    for (int r = 0; r < n_rows; ++r) {
      float tm = kNegInf, tl = 0.0f;
      std::fill(total.begin(), total.end(), 0.0f);
      for (int64_t off : sp.pieces) {
        const float* src = partials.data() + off + static_cast<int64_t>(r) * (p.v_head_dim + 2);
        merge_state(src[0], src[1], src + 2, tm, tl, total.data(), p.v_head_dim);
      }
      const float* q;
      float* out;
      row_ptrs(p, sp.item, r, &q, &out);
      write_output(tl, total.data(), out, p.v_head_dim);
    }
  }
}

void attention(const AttentionParams& p, ThreadPool& pool) { attention_with_isa(p, pool, best_isa()); }

}  // namespace deepinfer::kernels
