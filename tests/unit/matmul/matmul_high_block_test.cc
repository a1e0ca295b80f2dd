// kHigh with many rows (the blocked kernel of matmul_high_block.h, AVX2 and AVX-512) must give
// the scalar reference's bits for every quantized type, at row counts that are not multiples of
// the register tile (6 rows on AVX-512, 3 on AVX2), column counts that leave partial tiles and
// several column blocks, padded strides, and 1 or 2 threads; and a row must not change with the
// batch size. Each ISA's block kernel is also called directly, so a change in the dispatch
// cannot leave one untested.
#include "deepinfer/kernels/cpu/matmul_high_block.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "deepinfer/base/aligned_buffer.h"
#include "matmul_test_util.h"

namespace deepinfer::kernels {
namespace {

const DType kQuantTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                             DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

std::vector<IsaLevel> isas() {
  std::vector<IsaLevel> v = {IsaLevel::kScalar};
  if (cpu_features().has_avx2()) v.push_back(IsaLevel::kAvx2);
  if (cpu_features().has_avx512() && cpu_features().avx512_vnni) v.push_back(IsaLevel::kAvx512);
  return v;
}

struct Case {
  int64_t n_in, n_out, n_rows;
};

MatmulParams high_params(DType t, const testing::Weights& w, const Case& c,
                         const std::vector<float>& x, int64_t in_stride, std::vector<float>& out,
                         int64_t out_stride) {
  return testing::matmul_params(t, w, c.n_in, c.n_out, c.n_rows, x.data(), in_stride, out.data(), out_stride,
                                MatmulPrecision::kHigh);
}

std::vector<Case> cases(DType t) {
  using matmul_detail::high_block_cols;
  using matmul_detail::kHighBlockMinRows;
  const int64_t n_in = testing::is_k(t) ? 1536 : 96;
  // Two and a half column blocks, so one block ends in a partial register tile.
  const int64_t several_blocks = 2 * high_block_cols(n_in) + high_block_cols(n_in) / 2 + 3;
  return {{n_in, 1, kHighBlockMinRows},
          {n_in, 5, kHighBlockMinRows + 1},
          {n_in, 7, 13},
          {n_in, 37, 64},
          {n_in, several_blocks, 31},
          {testing::is_k(t) ? 256 : 32, 19, 130},
          {n_in, 3, 517},
          // Several passes over the inputs, the last one shorter.
          {testing::is_k(t) ? 2304 : 1056, 11, 14},
          // Several row chunks (matmul_detail::high_block_row_chunk).
          {testing::is_k(t) ? 1536 : 1056, 5, 200}};
}

TEST(MatmulHighBlock, ManyRowsBitwiseEqualToReference) {
  ThreadPool one(1), two(2);
  for (DType t : kQuantTypes) {
    for (const Case& c : cases(t)) {
      auto w = testing::random_weights(t, c.n_out, c.n_in, c.n_out % 2 ? 16 : 0, 7 + c.n_out);
      const int64_t in_stride = c.n_in + 3, out_stride = c.n_out + 5;
      auto x = testing::random_input(c.n_rows, in_stride, 11 + c.n_rows);
      std::vector<float> ref(c.n_rows * out_stride, -7.f);
      matmul_reference(high_params(t, w, c, x, in_stride, ref, out_stride));
      for (IsaLevel isa : isas()) {
        for (ThreadPool* pool : {&one, &two}) {
          std::vector<float> got(c.n_rows * out_stride, -7.f);
          matmul_with_isa(high_params(t, w, c, x, in_stride, got, out_stride), *pool, isa);
          EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)))
              << fmt::format(
                     "kHigh type={} isa={} threads={} n_in={} n_out={} n_rows={} differs from the "
                     "reference",
                     dtype_name(t), isa_name(isa), pool->num_threads(), c.n_in, c.n_out, c.n_rows);
        }
      }
    }
  }
}

// Every row of a large batch (blocked kernel) equals the same row alone (per-tile kernel).
TEST(MatmulHighBlock, RowAloneEqualsRowInLargeBatch) {
  ThreadPool two(2);
  for (DType t : kQuantTypes) {
    const Case c{testing::is_k(t) ? 512 : 576, 45, 77};
    auto w = testing::random_weights(t, c.n_out, c.n_in, 0, 3);
    auto x = testing::random_input(c.n_rows, c.n_in, 4);
    for (IsaLevel isa : isas()) {
      std::vector<float> all(c.n_rows * c.n_out);
      matmul_with_isa(high_params(t, w, c, x, c.n_in, all, c.n_out), two, isa);
      for (int64_t r = 0; r < c.n_rows; ++r) {
        std::vector<float> xr(x.begin() + r * c.n_in, x.begin() + (r + 1) * c.n_in),
            single(c.n_out);
        matmul_with_isa(high_params(t, w, {c.n_in, c.n_out, 1}, xr, c.n_in, single, c.n_out), two,
                        isa);
        ASSERT_EQ(0, std::memcmp(single.data(), all.data() + r * c.n_out, c.n_out * sizeof(float)))
            << fmt::format("kHigh type={} isa={} row={} differs between n_rows=1 and n_rows={}",
                           dtype_name(t), isa_name(isa), r, c.n_rows);
      }
    }
  }
}

// One column block [col_begin, col_end) of up to 8 rows through each ISA's block kernel, as
// run_high_block would call it: every row tail (1..8 rows, the 6- and 3-row tiles' remainders),
// a block not starting at column 0 and ending in a partial register tile, several passes over
// the inputs.
TEST(MatmulHighBlock, KernelCalledDirectlyEqualsReference) {
  struct Kernel {
    IsaLevel isa;
    void (*fn)(const matmul_detail::HighBlock&);
  };
  std::vector<Kernel> kernels;
  if (cpu_features().has_avx2())
    kernels.push_back({IsaLevel::kAvx2, matmul_detail::compute_high_block_avx2});
  if (cpu_features().has_avx512() && cpu_features().avx512_vnni)
    kernels.push_back({IsaLevel::kAvx512, matmul_detail::compute_high_block_avx512});
  if (kernels.empty()) GTEST_SKIP() << "no AVX2 on this host";
  for (DType t : kQuantTypes) {
    const int64_t n_in = testing::is_k(t) ? 2304 : 1056, n_out = 23, col_begin = 4, col_end = 19;
    auto w = testing::random_weights(t, n_out, n_in, 16, 5);
    for (int64_t rows = 1; rows <= 8; ++rows) {
      const Case c{n_in, n_out, rows};
      const int64_t in_stride = n_in + 1, out_stride = n_out + 2;
      auto x = testing::random_input(rows, in_stride, 9 + rows);
      std::vector<float> ref(rows * out_stride, -7.f);
      matmul_reference(high_params(t, w, c, x, in_stride, ref, out_stride));
      AlignedBuffer<float> scratch(
          matmul_detail::high_block_scratch_floats(col_end - col_begin, n_in));
      for (const Kernel& k : kernels) {
        std::vector<float> got(rows * out_stride, -7.f);
        k.fn({t, w.bytes.data(), w.row_bytes, n_in, col_begin, col_end, x.data(), in_stride, rows,
              got.data(), out_stride, scratch.data()});
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t o = 0; o < n_out; ++o) {
            const bool in_block = o >= col_begin && o < col_end;
            const float want = in_block ? ref[r * out_stride + o] : -7.f;
            ASSERT_EQ(0, std::memcmp(&want, &got[r * out_stride + o], sizeof(float)))
                << fmt::format(
                       "kHigh block kernel type={} isa={} rows={} row={} column={}: {} vs {}",
                       dtype_name(t), isa_name(k.isa), rows, r, o, got[r * out_stride + o], want);
          }
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels
