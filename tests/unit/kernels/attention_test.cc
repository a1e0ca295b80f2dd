// Paged attention against a dense double-precision reference, and its batch invariance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "deepinfer/base/fp16.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/kernels/cpu/attention.h"
#include "kernel_test_util.h"

namespace deepinfer::kernels {
namespace {

struct SeqSpec {
  int64_t first_pos;
  int n_tokens;
};

struct Shape {
  int n_heads, n_kv_heads, head_dim, v_head_dim, block_size, window;
  DType kv;
};

std::string describe(const Shape& s, const std::vector<SeqSpec>& seqs) {
  std::string r = fmt::format("heads={} kv_heads={} hd={} vhd={} bs={} window={} kv={} seqs=", s.n_heads,
                              s.n_kv_heads, s.head_dim, s.v_head_dim, s.block_size, s.window, dtype_name(s.kv));
  for (auto& q : seqs) r += fmt::format("({}+{})", q.first_pos, q.n_tokens);
  return r;
}

float round_trip(float x, DType t) {
  if (t == DType::kF16) return f16_to_f32(f32_to_f16(x));
  if (t == DType::kBF16) return bf16_to_f32(f32_to_bf16(x));
  return x;
}

// A batch: dense K/V per sequence, the paged cache filled through kv_cache_write with shuffled
// physical blocks, and the queries.
struct Batch {
  Shape sh;
  std::vector<SeqSpec> specs;
  std::vector<std::vector<float>> k, v;  // per seq [ctx, n_kv_heads * dim], already rounded to kv
  std::vector<float> q;
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionSeq> seqs;
  std::vector<uint8_t> k_cache, v_cache;
  int64_t token_stride = 0, block_stride = 0, n_tokens = 0;

  Batch(const Shape& s, std::vector<SeqSpec> sp, uint32_t seed) : sh(s), specs(std::move(sp)) {
    std::mt19937 rng(seed);
    const int64_t kw = int64_t{s.n_kv_heads} * s.head_dim, vw = int64_t{s.n_kv_heads} * s.v_head_dim;
    token_stride = std::max(kw, vw) + 3;  // padding so strides are exercised
    block_stride = token_stride * s.block_size + 5;
    int total_blocks = 0;
    for (auto& q : specs) total_blocks += static_cast<int>((q.first_pos + q.n_tokens + s.block_size - 1) / s.block_size);
    std::vector<int32_t> phys(total_blocks);
    std::iota(phys.begin(), phys.end(), 0);
    std::shuffle(phys.begin(), phys.end(), rng);
    const size_t eb = s.kv == DType::kF32 ? 4 : 2;
    k_cache.assign(block_stride * total_blocks * eb, 0);
    v_cache.assign(block_stride * total_blocks * eb, 0);
    int next_block = 0;
    for (auto& q : specs) {
      const int64_t ctx = q.first_pos + q.n_tokens;
      auto kd = testing::random_vec(ctx * kw, rng, -2.0f, 2.0f), vd = testing::random_vec(ctx * vw, rng);
      for (auto& x : kd) x = round_trip(x, s.kv);
      for (auto& x : vd) x = round_trip(x, s.kv);
      std::vector<int32_t> table((ctx + s.block_size - 1) / s.block_size);
      for (auto& b : table) b = phys[next_block++];
      std::vector<int32_t> slots(ctx);
      for (int64_t t = 0; t < ctx; ++t) slots[t] = table[t / s.block_size] * s.block_size + t % s.block_size;
      KvWriteParams w{kd.data(), kw, vd.data(), vw, ctx, slots.data(), k_cache.data(), v_cache.data(),
                      s.kv, s.block_size, block_stride, token_stride, kw, vw};
      kv_cache_write(w);
      k.push_back(std::move(kd));
      v.push_back(std::move(vd));
      tables.push_back(std::move(table));
      seqs.push_back({static_cast<int32_t>(n_tokens), q.n_tokens, q.first_pos, ctx, nullptr});
      n_tokens += q.n_tokens;
    }
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i].block_table = tables[i].data();
    q = testing::random_vec(n_tokens * s.n_heads * s.head_dim, rng, -1.0f, 1.0f);
  }

  AttentionParams params(float* out) const {
    return {q.data(), int64_t{sh.n_heads} * sh.head_dim, k_cache.data(), v_cache.data(), sh.kv,
            block_stride, token_stride, sh.block_size, sh.n_heads, sh.n_kv_heads, sh.head_dim,
            sh.v_head_dim, sh.window, 1.0f / std::sqrt(static_cast<float>(sh.head_dim)), out,
            int64_t{sh.n_heads} * sh.v_head_dim, seqs.data(), static_cast<int>(seqs.size())};
  }
  size_t out_size() const { return n_tokens * sh.n_heads * sh.v_head_dim; }

  // Dense attention straight from the unpaged K/V, in double.
  std::vector<float> dense() const {
    std::vector<float> out(out_size());
    const int group = sh.n_heads / sh.n_kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
    for (size_t si = 0; si < specs.size(); ++si) {
      for (int t = 0; t < specs[si].n_tokens; ++t) {
        const int64_t pos = specs[si].first_pos + t, row = seqs[si].token_start + t;
        const int64_t lo = sh.window ? std::max<int64_t>(0, pos - sh.window + 1) : 0;
        for (int h = 0; h < sh.n_heads; ++h) {
          const int g = h / group;
          const float* qr = q.data() + row * sh.n_heads * sh.head_dim + h * sh.head_dim;
          std::vector<double> sc;
          for (int64_t j = lo; j <= pos; ++j) {
            double d = 0;
            for (int x = 0; x < sh.head_dim; ++x) d += double(qr[x]) * k[si][(j * sh.n_kv_heads + g) * sh.head_dim + x];
            sc.push_back(d * scale);
          }
          const double mx = *std::max_element(sc.begin(), sc.end());
          double sum = 0;
          for (double& x : sc) sum += (x = std::exp(x - mx));
          for (int x = 0; x < sh.v_head_dim; ++x) {
            double acc = 0;
            for (int64_t j = lo; j <= pos; ++j) acc += sc[j - lo] * v[si][(j * sh.n_kv_heads + g) * sh.v_head_dim + x];
            out[row * sh.n_heads * sh.v_head_dim + h * sh.v_head_dim + x] = static_cast<float>(acc / sum);
          }
        }
      }
    }
    return out;
  }
};

void check_batch(const Shape& s, const std::vector<SeqSpec>& specs, ThreadPool& pool, uint32_t seed) {
  Batch b(s, specs, seed);
  const auto dense = b.dense();
  std::vector<float> ref(b.out_size());
  attention_reference(b.params(ref.data()));
  ASSERT_LT(testing::max_norm_err(ref.data(), dense.data(), ref.size()), 1e-6) << "reference " << describe(s, specs);
  std::vector<IsaLevel> isas = testing::simd_levels();
  isas.insert(isas.begin(), IsaLevel::kScalar);
  for (IsaLevel isa : isas) {
    std::vector<float> got(b.out_size(), NAN);
    attention_with_isa(b.params(got.data()), pool, isa);
    EXPECT_LT(testing::max_norm_err(got.data(), ref.data(), got.size()), 2e-5)
        << "isa=" << isa_name(isa) << " " << describe(s, specs);
  }
}

TEST(Attention, MatchesDenseReferenceAcrossShapes) {
  ThreadPool pool(2);
  const std::vector<std::vector<SeqSpec>> batches = {
      {{0, 1}},                            // first decode step
      {{0, 37}},                           // prefill only
      {{100, 1}, {5, 1}, {64, 1}},         // decode only
      {{0, 23}, {70, 1}, {30, 9}, {3, 1}}, // mixed: prefill, decode, chunked prefill
  };
  uint32_t seed = 10;
  for (auto [heads, kv_heads] : {std::pair{4, 4}, {6, 2}, {8, 1}}) {
    for (int bs : {1, 16, 64}) {
      for (auto& specs : batches) {
        check_batch({heads, kv_heads, 32, 32, bs, 0, DType::kF32}, specs, pool, seed++);
      }
    }
  }
  // Odd head sizes, MLA-style different V size, sliding windows, f16/bf16 caches.
  check_batch({4, 2, 17, 9, 16, 0, DType::kF32}, {{0, 20}, {40, 1}}, pool, seed++);
  check_batch({2, 1, 64, 48, 16, 0, DType::kF32}, {{10, 5}, {131, 1}}, pool, seed++);
  for (int window : {1, 7, 64}) {
    check_batch({4, 2, 32, 32, 16, window, DType::kF32}, {{0, 30}, {150, 1}, {90, 12}}, pool, seed++);
  }
  // Long contexts: few work items, so rows are split by key segment and merged.
  check_batch({4, 2, 32, 32, 16, 0, DType::kF32}, {{2100, 2}}, pool, seed++);
  check_batch({8, 1, 64, 64, 64, 0, DType::kF16}, {{3000, 1}}, pool, seed++);
  check_batch({4, 4, 32, 32, 16, 1500, DType::kF32}, {{2500, 3}}, pool, seed++);
  for (DType kv : {DType::kF16, DType::kBF16}) {
    check_batch({8, 2, 40, 40, 16, 0, kv}, {{0, 19}, {77, 1}, {200, 3}}, pool, seed++);
    check_batch({3, 3, 128, 128, 64, 0, kv}, {{130, 2}}, pool, seed++);
  }
}

TEST(Attention, RowResultsAreBatchInvariant) {
  const Shape s{8, 2, 64, 64, 16, 0, DType::kF32};
  const std::vector<SeqSpec> alone = {{90, 5}};
  const std::vector<SeqSpec> mixed = {{0, 40}, {90, 5}, {300, 1}, {17, 2}};
  ThreadPool one(1), two(2);
  std::vector<IsaLevel> isas = testing::simd_levels();
  isas.push_back(IsaLevel::kScalar);
  for (IsaLevel isa : isas) {
    for (DType kv : {DType::kF32, DType::kF16}) {
      Shape sk = s;
      sk.kv = kv;
      // Same seed for the shared sequence: build it alone, then copy its K/V and q into the mix.
      Batch a(sk, alone, 99);
      Batch m(sk, mixed, 5);
      // Overwrite sequence 1 of the mix with the lone sequence's data (cache via kv_cache_write).
      const int64_t kw = int64_t{sk.n_kv_heads} * sk.head_dim;
      std::vector<int32_t> slots(95);
      for (int t = 0; t < 95; ++t) slots[t] = m.tables[1][t / sk.block_size] * sk.block_size + t % sk.block_size;
      KvWriteParams w{a.k[0].data(), kw, a.v[0].data(), kw, 95, slots.data(), m.k_cache.data(), m.v_cache.data(),
                      kv, sk.block_size, m.block_stride, m.token_stride, kw, kw};
      kv_cache_write(w);
      const int64_t qw = int64_t{sk.n_heads} * sk.head_dim;
      std::copy(a.q.begin(), a.q.end(), m.q.begin() + m.seqs[1].token_start * qw);
      std::vector<float> out_a(a.out_size()), out_m1(m.out_size()), out_m2(m.out_size());
      attention_with_isa(a.params(out_a.data()), one, isa);
      attention_with_isa(m.params(out_m1.data()), one, isa);
      attention_with_isa(m.params(out_m2.data()), two, isa);
      const int64_t ow = int64_t{sk.n_heads} * sk.v_head_dim;
      EXPECT_EQ(0, std::memcmp(out_a.data(), out_m1.data() + m.seqs[1].token_start * ow, out_a.size() * 4))
          << isa_name(isa) << " " << dtype_name(kv);
      EXPECT_EQ(0, std::memcmp(out_m1.data(), out_m2.data(), out_m1.size() * 4)) << "thread count changed results";
    }
  }
}

// A long decode row alone is split across threads by key segment; among many sequences it is
// not. Both must give the same bits.
TEST(Attention, SplittingLongRowsKeepsBits) {
  const Shape s{4, 2, 64, 64, 16, 0, DType::kF16};
  const int64_t pos = 2600;
  Batch a(s, {{pos, 1}}, 21);
  std::vector<SeqSpec> many = {{pos, 1}};
  for (int i = 0; i < 7; ++i) many.push_back({10 + i, 1});
  Batch m(s, many, 22);
  const int64_t kw = int64_t{s.n_kv_heads} * s.head_dim;
  std::vector<int32_t> slots(pos + 1);
  for (int64_t t = 0; t <= pos; ++t) slots[t] = m.tables[0][t / s.block_size] * s.block_size + t % s.block_size;
  KvWriteParams w{a.k[0].data(), kw, a.v[0].data(), kw, pos + 1, slots.data(), m.k_cache.data(), m.v_cache.data(),
                  s.kv, s.block_size, m.block_stride, m.token_stride, kw, kw};
  kv_cache_write(w);
  std::copy(a.q.begin(), a.q.end(), m.q.begin());
  ThreadPool one(1), two(2);
  for (IsaLevel isa : {IsaLevel::kScalar, best_isa()}) {
    std::vector<float> alone1(a.out_size()), alone2(a.out_size()), mixed(m.out_size());
    attention_with_isa(a.params(alone1.data()), one, isa);  // 2 items < 2 threads? no: unsplit
    attention_with_isa(a.params(alone2.data()), two, isa);  // 2 items < 4: split by segment
    attention_with_isa(m.params(mixed.data()), two, isa);   // 16 items: unsplit
    EXPECT_EQ(0, std::memcmp(alone1.data(), alone2.data(), alone1.size() * 4)) << isa_name(isa);
    EXPECT_EQ(0, std::memcmp(alone2.data(), mixed.data(), alone2.size() * 4)) << isa_name(isa);
    std::vector<float> ref(a.out_size());
    attention_reference(a.params(ref.data()));
    EXPECT_LT(testing::max_norm_err(alone2.data(), ref.data(), ref.size()), 2e-5);
  }
}

// Decode rows of many sequences go in work items that take every kv head of a sequence at
// once; a sequence alone is cut by kv head (and, past one key segment, by segment). Same bits
// either way. 9 heads over 3 kv heads of 64 dims is SmolLM2's shape (the AVX-512 register path).
TEST(Attention, DecodeItemsOverAllKvHeadsKeepBits) {
  ThreadPool one(1), two(2);
  std::vector<IsaLevel> isas = testing::simd_levels();
  isas.push_back(IsaLevel::kScalar);
  for (DType kv : {DType::kF32, DType::kF16, DType::kBF16}) {
    const Shape s{9, 3, 64, 64, 16, 0, kv};
    std::vector<SeqSpec> specs;
    for (int i = 0; i < 12; ++i) specs.push_back({300 + 97 * i, 1});  // the longest crosses 1024
    Batch m(s, specs, 40 + static_cast<uint32_t>(kv));
    std::vector<float> ref(m.out_size());
    attention_reference(m.params(ref.data()));
    for (IsaLevel isa : isas) {
      std::vector<float> mixed1(m.out_size()), mixed2(m.out_size());
      attention_with_isa(m.params(mixed1.data()), one, isa);  // 12 items: all kv heads each
      attention_with_isa(m.params(mixed2.data()), two, isa);
      const std::string what = fmt::format("{} {}", isa_name(isa), dtype_name(kv));
      EXPECT_LT(testing::max_norm_err(mixed1.data(), ref.data(), ref.size()), 2e-5) << what;
      EXPECT_EQ(0, std::memcmp(mixed1.data(), mixed2.data(), mixed1.size() * 4)) << what;
      const int64_t ow = int64_t{s.n_heads} * s.v_head_dim;
      for (size_t i = 0; i < specs.size(); ++i) {
        std::vector<float> alone(m.out_size(), NAN);
        AttentionParams p = m.params(alone.data());
        p.seqs = &m.seqs[i];
        p.n_seqs = 1;
        attention_with_isa(p, two, isa);  // one item per kv head, split by segment past 1024
        const int64_t row = m.seqs[i].token_start;
        EXPECT_EQ(0, std::memcmp(alone.data() + row * ow, mixed1.data() + row * ow, ow * 4)) << what << " seq " << i;
      }
    }
  }
}

TEST(Attention, KvCacheWriteSkipsNegativeSlotsAndRounds) {
  const float k[4] = {1.0f, 2.5f, -3.0f, 1e-3f}, v[4] = {4, 5, 6, 7};
  const int32_t slots[2] = {3, -1};
  std::vector<uint16_t> kc(16, 0xffff), vc(16, 0xffff);
  KvWriteParams w{k, 2, v, 2, 2, slots, kc.data(), vc.data(), DType::kF16, 2, 8, 4, 2, 2};
  kv_cache_write(w);
  // slot 3 = block 1, slot 1 -> element offset 8 + 4.
  EXPECT_EQ(f16_to_f32(kc[12]), 1.0f);
  EXPECT_EQ(f16_to_f32(kc[13]), 2.5f);
  EXPECT_EQ(f16_to_f32(vc[12]), 4.0f);
  int untouched = 0;
  for (auto x : kc) untouched += x == 0xffff;
  EXPECT_EQ(untouched, 14);
}

}  // namespace
}  // namespace deepinfer::kernels
