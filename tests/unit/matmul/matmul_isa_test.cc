// Every ISA variant of matmul against the scalar reference over many shapes and all weight
// types, and the batch-invariance property (bitwise identical rows whatever the batch/threads).
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "matmul_test_util.h"

namespace deepinfer::kernels {
namespace {

using testing::kAllWeightTypes;

constexpr MatmulPrecision kPrecisions[] = {MatmulPrecision::kHigh, MatmulPrecision::kInt8};

const char* prec_name(MatmulPrecision p) { return p == MatmulPrecision::kHigh ? "high" : "int8"; }

std::vector<IsaLevel> available_isas() {
  std::vector<IsaLevel> v = {IsaLevel::kScalar};
  if (cpu_features().has_avx2()) v.push_back(IsaLevel::kAvx2);
  if (cpu_features().has_avx512() && cpu_features().avx512_vnni) v.push_back(IsaLevel::kAvx512);
  return v;
}

MatmulParams params(DType t, const testing::Weights& w, int64_t n_out, int64_t n_in,
                    const std::vector<float>& x, int64_t n_rows, int64_t in_stride, std::vector<float>& out,
                    int64_t out_stride, MatmulPrecision prec = MatmulPrecision::kHigh) {
  MatmulParams p;
  p.weight = w.bytes.data();
  p.weight_type = t;
  p.n_out = n_out;
  p.n_in = n_in;
  p.weight_row_bytes = w.row_bytes;
  p.input = x.data();
  p.n_rows = n_rows;
  p.input_stride = in_stride;
  p.output = out.data();
  p.output_stride = out_stride;
  p.batch_invariant = true;
  p.precision = prec;
  return p;
}

int64_t test_n_in(DType t) {
  if (testing::is_k(t)) return 512;
  if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) return 45;  // odd: tail path
  return 96;
}

void all_variants_match_reference(MatmulPrecision prec) {
  ThreadPool pool(2);
  const int64_t outs[] = {1, 3, 17, 1000};
  const int64_t rows[] = {1, 2, 3, 5, 16, 33, 70};
  for (DType t : kAllWeightTypes) {
    const int64_t n_in = test_n_in(t);
    for (int64_t n_out : outs) {
      auto w = testing::random_weights(t, n_out, n_in, n_out % 2 ? 16 : 0, 17 + n_out);
      for (int64_t n_rows : rows) {
        if (n_out == 1000 && n_rows > 16) continue;  // keep the scalar reference fast
        const int64_t in_stride = n_in + 3, out_stride = n_out + 5;
        auto x = testing::random_input(n_rows, in_stride, 5 + n_rows);
        std::vector<float> ref(n_rows * out_stride, -7.f);
        matmul_reference(params(t, w, n_out, n_in, x, n_rows, in_stride, ref, out_stride, prec));
        for (IsaLevel isa : available_isas()) {
          std::vector<float> got(n_rows * out_stride, -7.f);
          matmul_with_isa(params(t, w, n_out, n_in, x, n_rows, in_stride, got, out_stride, prec), pool, isa);
          const double err = testing::nmse(got, ref, n_rows, n_out, out_stride);
          EXPECT_LT(err, 1e-10) << fmt::format("prec={} type={} isa={} n_out={} n_in={} n_rows={}", prec_name(prec),
                                               dtype_name(t), isa_name(isa), n_out, n_in, n_rows);
          // kHigh fixes its fp32 operation order (matmul_high_tile.h): every ISA gives the same bits.
          if (prec == MatmulPrecision::kHigh && !testing::is_float(t)) {
            EXPECT_EQ(got, ref) << fmt::format("kHigh type={} isa={} n_out={} n_rows={} differs from the reference",
                                               dtype_name(t), isa_name(isa), n_out, n_rows);
          }
          // Padding between rows must be left alone.
          EXPECT_EQ(got[n_out], -7.f) << dtype_name(t) << " wrote into the output stride padding";
        }
      }
    }
  }
}

TEST(MatmulIsa, AllVariantsMatchReference) {
  for (MatmulPrecision prec : kPrecisions) all_variants_match_reference(prec);
}

void larger_rows_match_reference(MatmulPrecision prec) {
  ThreadPool pool(2);
  for (DType t : kAllWeightTypes) {
    const int64_t n_in = testing::is_k(t) ? 1536 : 576, n_out = 37, n_rows = 6;
    auto w = testing::random_weights(t, n_out, n_in, 0, 99);
    auto x = testing::random_input(n_rows, n_in, 3);
    std::vector<float> ref(n_rows * n_out);
    matmul_reference(params(t, w, n_out, n_in, x, n_rows, n_in, ref, n_out, prec));
    for (IsaLevel isa : available_isas()) {
      std::vector<float> got(n_rows * n_out);
      matmul_with_isa(params(t, w, n_out, n_in, x, n_rows, n_in, got, n_out, prec), pool, isa);
      EXPECT_LT(testing::nmse(got, ref, n_rows, n_out, n_out), 1e-10)
          << fmt::format("prec={} type={} isa={} n_in={}", prec_name(prec), dtype_name(t), isa_name(isa), n_in);
    }
  }
}

TEST(MatmulIsa, LargerRowsMatchReference) {
  for (MatmulPrecision prec : kPrecisions) larger_rows_match_reference(prec);
}

// A row's result must be bitwise the same alone, inside a batch of 37, on 1 or 2 threads.
void batch_invariant(MatmulPrecision prec) {
  ThreadPool one(1), two(2);
  const int64_t n_out = 50, batch = 37;
  for (DType t : kAllWeightTypes) {
    const int64_t n_in = test_n_in(t);
    auto w = testing::random_weights(t, n_out, n_in, 0, 4);
    auto x = testing::random_input(batch, n_in, 8);
    for (IsaLevel isa : available_isas()) {
      std::vector<float> all(batch * n_out);
      matmul_with_isa(params(t, w, n_out, n_in, x, batch, n_in, all, n_out, prec), two, isa);
      for (int64_t r : {0, 5, 33, 36}) {
        std::vector<float> xr(x.begin() + r * n_in, x.begin() + (r + 1) * n_in), single(n_out);
        matmul_with_isa(params(t, w, n_out, n_in, xr, 1, n_in, single, n_out, prec), one, isa);
        EXPECT_EQ(0, std::memcmp(single.data(), all.data() + r * n_out, n_out * sizeof(float)))
            << fmt::format("prec={} type={} isa={} row={} differs between n_rows=1 (1 thread) and n_rows={} (2 threads)",
                           prec_name(prec), dtype_name(t), isa_name(isa), r, batch);
      }
    }
  }
}

TEST(MatmulIsa, BatchInvariant) {
  for (MatmulPrecision prec : kPrecisions) batch_invariant(prec);
}

// matmul_group: every output bitwise what matmul gives for that params alone, whatever mix of
// types, shapes, row counts (1 to the blocked kHigh kernel's many) and precisions the group has.
TEST(MatmulIsa, GroupEqualsSeparateCalls) {
  ThreadPool pool(2);
  const DType types[] = {DType::kQ4_1, DType::kQ8_0, DType::kQ6_K, DType::kF16};
  const int64_t outs[] = {40, 7, 129, 64};
  for (MatmulPrecision prec : kPrecisions) {
    for (int64_t n_rows : {1, 3, 8, 12, 30}) {
      for (IsaLevel isa : available_isas()) {
        std::vector<testing::Weights> ws;
        std::vector<std::vector<float>> xs, alone, grouped;
        std::vector<MatmulParams> ps;
        for (size_t g = 0; g < 4; ++g) {
          const int64_t n_in = test_n_in(types[g]);
          ws.push_back(testing::random_weights(types[g], outs[g], n_in, 0, static_cast<uint32_t>(11 + g)));
          xs.push_back(testing::random_input(n_rows, n_in, static_cast<uint32_t>(21 + g)));
          alone.emplace_back(n_rows * outs[g], -7.f);
          grouped.emplace_back(n_rows * outs[g], -7.f);
        }
        for (size_t g = 0; g < 4; ++g) {
          const int64_t n_in = test_n_in(types[g]);
          matmul_with_isa(params(types[g], ws[g], outs[g], n_in, xs[g], n_rows, n_in, alone[g], outs[g], prec), pool, isa);
          ps.push_back(params(types[g], ws[g], outs[g], n_in, xs[g], n_rows, n_in, grouped[g], outs[g], prec));
        }
        for (size_t size : {size_t{1}, size_t{2}, size_t{4}}) {
          for (auto& v : grouped) std::fill(v.begin(), v.end(), -7.f);
          matmul_group_with_isa(std::span<const MatmulParams>(ps.data(), size), pool, isa);
          for (size_t g = 0; g < size; ++g)
            EXPECT_EQ(alone[g], grouped[g]) << fmt::format("prec={} type={} isa={} rows={} group of {}, member {}",
                                                           prec_name(prec), dtype_name(types[g]), isa_name(isa),
                                                           n_rows, size, g);
        }
      }
    }
  }
}

TEST(MatmulIsa, BlasPathForManyF32Rows) {
  ThreadPool pool(2);
  const int64_t n_in = 64, n_out = 40, n_rows = 48;
  auto w = testing::random_weights(DType::kF32, n_out, n_in, 0, 1);
  auto x = testing::random_input(n_rows, n_in, 2);
  std::vector<float> ref(n_rows * n_out), got(n_rows * n_out);
  auto p = params(DType::kF32, w, n_out, n_in, x, n_rows, n_in, ref, n_out);
  matmul_reference(p);
  p.output = got.data();
  p.batch_invariant = false;
  matmul(p, pool);
  EXPECT_LT(testing::nmse(got, ref, n_rows, n_out, n_out), 1e-10);
}

TEST(MatmulIsa, CheckRejectsBadParams) {
  auto w = testing::random_weights(DType::kQ4_0, 4, 64, 0, 1);
  auto x = testing::random_input(2, 64, 2);
  std::vector<float> out(8);
  auto p = params(DType::kQ4_0, w, 4, 64, x, 2, 64, out, 4);
  EXPECT_TRUE(matmul_check(p).is_ok());
  auto bad = p;
  bad.n_in = 48;
  EXPECT_EQ(matmul_check(bad).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.weight_row_bytes = 10;
  EXPECT_EQ(matmul_check(bad).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.output_stride = 3;
  EXPECT_EQ(matmul_check(bad).code(), StatusCode::kInvalidArgument);
  bad = p;
  bad.weight_type = DType::kQ8_K;
  EXPECT_EQ(matmul_check(bad).code(), StatusCode::kUnsupported);
  EXPECT_FALSE(matmul_supports(DType::kQ2_K));
}

}  // namespace
}  // namespace deepinfer::kernels
