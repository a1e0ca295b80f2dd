// The device sampler's kernel and its block-wide pieces (sampling.h, sample_rows.cu launches
// it). Kept apart from the launcher so that tests/unit/cuda/device_emulation.h can also compile
// it as host code and run a block's threads as fibers: the sampler's logic is then checked
// against engine::sample on machines without a GPU.
//
// One block of kThreads per row. Candidates are keyed (logit desc, id asc) as 64-bit integers,
// so selection (a radix select) and sorting (bitonic, in the row's scratch) never meet a tie.
// Float arithmetic uses explicitly rounded intrinsics: no FMA contraction, the CPU's values.
// The double sums are chunked in index order (ordered_sum); see sampling.h.
#pragma once

#include <cstdint>

#include "deepinfer/kernels/cuda/philox.cuh"
#include "deepinfer/kernels/cuda/reduce.cuh"
#include "deepinfer/kernels/cuda/sampling.h"

// Internal linkage: the emulation test compiles its own host copy next to di_cuda's.
namespace deepinfer::cuda::detail::sampler {
namespace {

using detail::kThreads;                       // reduce.cuh
constexpr int kBuckets = 2048;                // engine/sampler.cc's apply_top_p
constexpr float kBucketScale = 2048 / 40.0f;  // its kBuckets / kRange, rounded as there
constexpr long long kNone = 0x7fffffffffffffffLL;

struct Shared {
  double part[kThreads];  // chunk sums, then their exclusive prefixes
  long long cnt[kThreads];
  float best_v[kThreads];
  int32_t best_i[kThreads];
  unsigned hist[256];
  double total;
  unsigned long long prefix, counter;
  long long k_rem;
};

__device__ __forceinline__ float logit(const float* x, int64_t i) {
  const float v = x[i];
  return isnan(v) ? -INFINITY : v;  // NaN counts as disallowed, as on the CPU
}
// Float bits in an order-preserving unsigned form (-0 as +0: the CPU's comparisons tie them).
__device__ __forceinline__ uint32_t ordered(float f) {
  const uint32_t b = f == 0.0f ? 0u : __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float unordered(uint32_t u) {
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}
// Larger key = better candidate: (logit desc, id asc).
__device__ __forceinline__ uint64_t make_key(float c, int64_t id) {
  return (uint64_t{ordered(c)} << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}
__device__ __forceinline__ float key_value(uint64_t k) {
  return unordered(static_cast<uint32_t>(k >> 32));
}
__device__ __forceinline__ int32_t key_id(uint64_t k) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(k));
}
// exp(logit - top) as the CPU: the difference in float, exp in double.
__device__ __forceinline__ double weight(float c, float top) {
  return exp(static_cast<double>(__fsub_rn(c, top)));
}

__device__ long long block_reduce_ll(long long v, bool take_max, long long* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      const long long o = smem[threadIdx.x + s];
      if (take_max ? o > smem[threadIdx.x] : o < smem[threadIdx.x]) smem[threadIdx.x] = o;
    }
    __syncthreads();
  }
  const long long r = smem[0];
  __syncthreads();
  return r;
}

// Sum of w(i) over [0, n): thread t sums contiguous chunk t in index order, thread 0 joins the
// chunk sums in order and leaves each chunk's exclusive prefix in s.part for first_cross.
template <class W>
__device__ double ordered_sum(W w, int64_t n, Shared& s) {
  const int64_t chunk = (n + kThreads - 1) / kThreads;
  const int64_t b = threadIdx.x * chunk, e = b + chunk < n ? b + chunk : n;
  double a = 0.0;
  for (int64_t i = b; i < e; ++i) a += w(i);
  s.part[threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.x == 0) {
    double run = 0.0;
    for (int t = 0; t < kThreads; ++t) {
      const double v = s.part[t];
      s.part[t] = run;
      run += v;
    }
    s.total = run;
  }
  __syncthreads();
  return s.total;
}

// The first i in [0, n) where base + the sum of w over [0, i] passes target (> when strict,
// >= otherwise), -1 if none. Needs the ordered_sum of the same w and n just before.
template <class W>
__device__ int64_t first_cross(W w, int64_t n, double base, double target, bool strict, Shared& s) {
  const int64_t chunk = (n + kThreads - 1) / kThreads;
  const int64_t b = threadIdx.x * chunk, e = b + chunk < n ? b + chunk : n;
  double run = base + s.part[threadIdx.x];
  long long found = kNone;
  for (int64_t i = b; i < e; ++i) {
    run += w(i);
    if (strict ? run > target : run >= target) {
      found = i;
      break;
    }
  }
  const long long first = block_reduce_ll(found, false, s.cnt);
  return first == kNone ? -1 : first;
}

// The k-th largest key (1 <= k <= the number of candidates): 8 radix passes of 8 bits.
template <class KeyOf>
__device__ uint64_t kth_largest_key(KeyOf key_of, int64_t n, int64_t k, Shared& s) {
  uint64_t prefix = 0, mask = 0;
  long long k_rem = k;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += kThreads) s.hist[d] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      uint64_t key;
      if (key_of(i, key) && (key & mask) == prefix) atomicAdd(&s.hist[(key >> shift) & 255], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      long long cum = 0;
      for (int d = 255; d >= 0; --d) {
        if (cum + s.hist[d] >= k_rem) {
          s.prefix = prefix | (uint64_t(d) << shift);
          s.k_rem = k_rem - cum;
          break;
        }
        cum += s.hist[d];
      }
    }
    __syncthreads();
    prefix = s.prefix;
    k_rem = s.k_rem;
    mask |= uint64_t{255} << shift;
    __syncthreads();
  }
  return prefix;
}

// The keys of [0, n) that pred accepts, sorted descending into scratch (bitonic, padded with 0
// below every real key to a power of two); returns how many. Keys are unique, so the result
// does not depend on the order the atomics hand out slots.
template <class Pred>
__device__ int64_t gather_sorted(Pred pred, int64_t n, uint64_t* scratch, Shared& s) {
  if (threadIdx.x == 0) s.counter = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    uint64_t key;
    if (pred(i, key)) scratch[atomicAdd(&s.counter, 1ull)] = key;
  }
  __syncthreads();
  const int64_t m = static_cast<int64_t>(s.counter);
  int64_t n2 = 1;
  while (n2 < m) n2 <<= 1;
  for (int64_t i = m + threadIdx.x; i < n2; i += kThreads) scratch[i] = 0;
  __syncthreads();
  for (int64_t size = 2; size <= n2; size <<= 1) {
    for (int64_t stride = size / 2; stride > 0; stride >>= 1) {
      for (int64_t i = threadIdx.x; i < n2 / 2; i += kThreads) {
        const int64_t lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const bool desc = (lo & size) == 0;
        const uint64_t a = scratch[lo], b = scratch[hi];
        if (desc ? a < b : a > b) {
          scratch[lo] = b;
          scratch[hi] = a;
        }
      }
      __syncthreads();
    }
  }
  return m;
}

// top_k < candidates: the k best, sorted, then top-p and min-p as prefixes, then the draw.
template <class KeyOf>
__device__ int32_t sample_top_k(KeyOf key_of, const SampleRow& sr, int64_t vocab, double u,
                                uint64_t* scratch, Shared& s) {
  const uint64_t kth = kth_largest_key(key_of, vocab, sr.top_k, s);
  int64_t m = gather_sorted([&](int64_t i, uint64_t& key) { return key_of(i, key) && key >= kth; },
                            vocab, scratch, s);
  const float top = key_value(scratch[0]);
  auto w = [&](int64_t j) { return weight(key_value(scratch[j]), top); };
  if (sr.top_p < 1.0f) {
    const double target = __dmul_rn(static_cast<double>(sr.top_p), ordered_sum(w, m, s));
    const int64_t j = first_cross(w, m, 0.0, target, false, s);
    if (j >= 0) m = j + 1;
  }
  if (sr.use_min_p) {
    const float cut = __fadd_rn(top, sr.log_min_p);
    long long keep = 0;
    for (int64_t j = threadIdx.x; j < m; j += kThreads) keep += key_value(scratch[j]) >= cut;
    m = detail::block_sum(keep, s.cnt);
  }
  const double target = __dmul_rn(u, ordered_sum(w, m, s));
  const int64_t j = first_cross(w, m, 0.0, target, true, s);
  return key_id(scratch[j >= 0 ? j : m - 1]);
}

// No top-k: list A = candidates of the buckets before the top-p edge (all of them without
// top-p) in id order, list B = the sorted prefix of the edge bucket; min-p filters both.
template <class Cand>
__device__ int32_t sample_buckets(Cand cand, const SampleRow& sr, float top, int64_t vocab,
                                  double u, uint64_t* scratch, Shared& s) {
  auto bucket = [&](float c) {
    const float d = __fmul_rn(__fsub_rn(top, c), kBucketScale);
    return d >= kBuckets - 1 ? kBuckets - 1 : static_cast<int>(d);
  };
  int edge = kBuckets;  // no top-p: every candidate is in A
  int64_t nb = 0;
  auto wb = [&](int64_t j) { return weight(key_value(scratch[j]), top); };
  if (sr.top_p < 1.0f) {
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      float c;
      scratch[i] = __double_as_longlong(cand(i, c) ? weight(c, top) : 0.0);
    }
    __syncthreads();
    const double target = __dmul_rn(
        static_cast<double>(sr.top_p),
        ordered_sum([&](int64_t i) { return __longlong_as_double(scratch[i]); }, vocab, s));
    auto mass_upto = [&](int b) {  // the mass of buckets [0, b]
      return ordered_sum(
          [&](int64_t i) {
            float c;
            return cand(i, c) && bucket(c) <= b ? __longlong_as_double(scratch[i]) : 0.0;
          },
          vocab, s);
    };
    int lo = 0, hi = kBuckets - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (mass_upto(mid) >= target)
        hi = mid;
      else
        lo = mid + 1;
    }
    edge = lo;
    // As the CPU: if no bucket reaches the target, the last one is the edge, all mass before.
    double before = mass_upto(edge);
    if (before >= target)
      before = edge > 0 ? mass_upto(edge - 1) : 0.0;
    else
      edge = kBuckets - 1;
    const int64_t n_edge = gather_sorted(
        [&](int64_t i, uint64_t& key) {
          float c;
          if (!cand(i, c) || bucket(c) != edge) return false;
          key = make_key(c, i);
          return true;
        },
        vocab, scratch, s);
    ordered_sum(wb, n_edge, s);
    const int64_t j = first_cross(wb, n_edge, before, target, false, s);
    nb = j >= 0 ? j + 1 : n_edge;
  }
  const float cut = sr.use_min_p ? __fadd_rn(top, sr.log_min_p) : -INFINITY;
  if (sr.use_min_p) {  // B is sorted: min-p keeps a prefix
    long long keep = 0;
    for (int64_t j = threadIdx.x; j < nb; j += kThreads) keep += key_value(scratch[j]) >= cut;
    nb = detail::block_sum(keep, s.cnt);
  }
  auto in_a = [&](int64_t i, float& c) {
    return cand(i, c) && (edge == kBuckets || bucket(c) < edge) && c >= cut;
  };
  auto wa = [&](int64_t i) {
    float c;
    return in_a(i, c) ? weight(c, top) : 0.0;
  };
  const double tb = nb > 0 ? ordered_sum(wb, nb, s) : 0.0;
  const double ta = ordered_sum(wa, vocab, s);
  const double target = __dmul_rn(u, ta + tb);
  const int64_t i = first_cross(wa, vocab, 0.0, target, true, s);
  if (i >= 0) return static_cast<int32_t>(i);
  if (nb > 0) {
    ordered_sum(wb, nb, s);
    const int64_t j = first_cross(wb, nb, ta, target, true, s);
    return key_id(scratch[j >= 0 ? j : nb - 1]);
  }
  long long last = -1;  // the CPU's fallback: the list's last element
  for (int64_t k = threadIdx.x; k < vocab; k += kThreads) {
    float c;
    if (in_a(k, c)) last = k;
  }
  return static_cast<int32_t>(block_reduce_ll(last, true, s.cnt));
}

__global__ void __launch_bounds__(kThreads) sample_kernel(SampleParams p) {
  __shared__ Shared s;
  const float* x = p.logits + blockIdx.x * p.stride;
  const SampleRow sr = p.row_params[blockIdx.x];
  uint64_t* scratch = p.scratch + blockIdx.x * p.scratch_stride;
  // The argmax (lowest id among ties; +inf wins) and the number of finite candidates.
  float v = -INFINITY;
  int32_t id = -1;
  long long n_finite = 0;
  for (int64_t i = threadIdx.x; i < p.vocab; i += kThreads) {
    const float l = logit(x, i);
    if (l > -INFINITY) {
      if (id < 0 || l > v) {
        v = l;
        id = static_cast<int32_t>(i);
      }
      n_finite += l < INFINITY;
    }
  }
  s.best_v[threadIdx.x] = v;
  s.best_i[threadIdx.x] = id;
  __syncthreads();
  for (int h = kThreads / 2; h > 0; h >>= 1) {
    if (static_cast<int>(threadIdx.x) < h) {
      const int o = threadIdx.x + h;
      const float bv = s.best_v[threadIdx.x];
      const int32_t bi = s.best_i[threadIdx.x];
      if (s.best_i[o] >= 0 &&
          (bi < 0 || s.best_v[o] > bv || (s.best_v[o] == bv && s.best_i[o] < bi))) {
        s.best_v[threadIdx.x] = s.best_v[o];
        s.best_i[threadIdx.x] = s.best_i[o];
      }
    }
    __syncthreads();
  }
  const float mx = s.best_v[0];
  const int32_t argmax = s.best_i[0];
  const long long n_cand = detail::block_sum(n_finite, s.cnt);
  if (argmax < 0 || mx == INFINITY || sr.greedy) {
    if (threadIdx.x == 0) p.tokens[blockIdx.x] = argmax;
    return;
  }
  const float inv_t = sr.inv_temperature;
  auto cand = [&](int64_t i, float& c) {
    const float l = logit(x, i);
    if (!(l > -INFINITY)) return false;
    c = __fmul_rn(l, inv_t);
    return true;
  };
  const double u = detail::philox_uniform_double(sr.seed, sr.stream_id, sr.step);
  int32_t token;
  if (sr.top_k > 0 && sr.top_k < n_cand) {
    auto key_of = [&](int64_t i, uint64_t& key) {
      float c;
      if (!cand(i, c)) return false;
      key = make_key(c, i);
      return true;
    };
    token = sample_top_k(key_of, sr, p.vocab, u, scratch, s);
  } else {
    token = sample_buckets(cand, sr, __fmul_rn(mx, inv_t), p.vocab, u, scratch, s);
  }
  if (threadIdx.x == 0) p.tokens[blockIdx.x] = token;
}

}  // namespace
}  // namespace deepinfer::cuda::detail::sampler
