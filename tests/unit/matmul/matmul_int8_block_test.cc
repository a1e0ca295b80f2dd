// kInt8 with many rows (the blocked AVX-512 VNNI kernel of matmul_int8_block.h) must give, for
// every row, bitwise what the per-column tiles give for that row alone (batch invariance): for
// each 32-element weight type, at row counts that leave partial register tiles, column counts
// that leave partial pairs, tiles and blocks, padded strides, and 1 or 2 threads. The kernel is
// also called directly on a column block that does not start at column 0. The scalar reference
// (a different float order) only bounds the error.
#include "deepinfer/kernels/cpu/matmul_int8_block.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "deepinfer/base/aligned_buffer.h"
#include "deepinfer/kernels/cpu/quantize_activation.h"
#include "matmul_test_util.h"

namespace deepinfer::kernels {
namespace {

const DType kBlockTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0};

// The AVX-512 paths, unless DEEPINFER_ISA caps the level (then matmul_with_isa gives the lower
// ISA's different float order and there is nothing to compare with).
bool have_vnni() { return best_isa() == IsaLevel::kAvx512 && cpu_features().avx512_vnni; }

struct Case {
  int64_t n_in, n_out, n_rows;
};

MatmulParams int8_params(DType t, const testing::Weights& w, const Case& c, const float* x,
                         int64_t in_stride, float* out, int64_t out_stride) {
  return testing::matmul_params(t, w, c.n_in, c.n_out, c.n_rows, x, in_stride, out, out_stride,
                                MatmulPrecision::kInt8);
}

// Every row through the per-column tiles: one call per row (n_rows = 1 < kInt8BlockMinRows).
std::vector<float> rows_alone(DType t, const testing::Weights& w, const Case& c,
                              const std::vector<float>& x, int64_t in_stride, int64_t out_stride,
                              ThreadPool& pool) {
  std::vector<float> out(c.n_rows * out_stride, -7.f);
  for (int64_t r = 0; r < c.n_rows; ++r)
    matmul_with_isa(int8_params(t, w, {c.n_in, c.n_out, 1}, x.data() + r * in_stride, in_stride,
                                out.data() + r * out_stride, out_stride),
                    pool, IsaLevel::kAvx512);
  return out;
}

std::vector<Case> cases() {
  using matmul_detail::int8_block_cols;
  const int64_t n = 96;
  return {{n, 1, 9},
          {n, 5, 10},
          {n, 7, 13},
          {n, 37, 64},
          {32, 19, 130},
          {n, 3, 517},
          {n, 33, 31},
          {n, 17, 600},
          {576, 45, 77},
          {1056, 23, 14},
          // Several column blocks, the last one partial, and an odd column count.
          {n, 2 * int8_block_cols(n) + int8_block_cols(n) / 2 + 3, 11},
          // Several row chunks (int8_block_row_chunk), the last one short.
          {1536, 9, 700}};
}

TEST(MatmulInt8Block, ManyRowsBitwiseEqualToRowsAlone) {
  if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this host";
  ThreadPool one(1), two(2);
  for (DType t : kBlockTypes) {
    for (const Case& c : cases()) {
      auto w = testing::random_weights(t, c.n_out, c.n_in, c.n_out % 2 ? 16 : 0, 7 + c.n_out);
      const int64_t in_stride = c.n_in + 3, out_stride = c.n_out + 5;
      auto x = testing::random_input(c.n_rows, in_stride, 11 + c.n_rows);
      const std::vector<float> want = rows_alone(t, w, c, x, in_stride, out_stride, one);
      std::vector<float> ref(c.n_rows * out_stride, -7.f);
      matmul_reference(int8_params(t, w, c, x.data(), in_stride, ref.data(), out_stride));
      EXPECT_LT(testing::nmse(want, ref, c.n_rows, c.n_out, out_stride), 1e-8) << dtype_name(t);
      for (ThreadPool* pool : {&one, &two}) {
        std::vector<float> got(c.n_rows * out_stride, -7.f);
        matmul_with_isa(int8_params(t, w, c, x.data(), in_stride, got.data(), out_stride), *pool,
                        IsaLevel::kAvx512);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << fmt::format(
                   "int8 type={} threads={} n_in={} n_out={} n_rows={} differs from the rows alone",
                   dtype_name(t), pool->num_threads(), c.n_in, c.n_out, c.n_rows);
      }
    }
  }
}

// The same row inside calls of every row count from 1 to 40 (tiles below int8_block_min_rows,
// 9 or 24, the block kernel from there, every tail of its 4-row tiles) gives the same bits.
TEST(MatmulInt8Block, RowEqualAcrossRowCounts) {
  if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this host";
  ThreadPool two(2);
  for (DType t : kBlockTypes) {
    const Case c{576, 45, 40};
    auto w = testing::random_weights(t, c.n_out, c.n_in, 0, 3);
    auto x = testing::random_input(c.n_rows, c.n_in, 4);
    std::vector<float> first;
    for (int64_t n = 1; n <= c.n_rows; ++n) {
      std::vector<float> out(n * c.n_out);
      matmul_with_isa(int8_params(t, w, {c.n_in, c.n_out, n}, x.data() + (c.n_rows - n) * c.n_in,
                                  c.n_in, out.data(), c.n_out),
                      two, IsaLevel::kAvx512);
      // The last row of every call is the input's last row.
      const std::vector<float> last(out.end() - c.n_out, out.end());
      if (first.empty()) first = last;
      ASSERT_EQ(0, std::memcmp(first.data(), last.data(), c.n_out * sizeof(float))) << fmt::format(
          "int8 type={} last row differs between n_rows=1 and n_rows={}", dtype_name(t), n);
    }
  }
}

// One column block [col_begin, col_end) through the kernel as run_int8_block calls it: odd
// width, not starting at column 0, a few rows, equal to the rows alone there and untouched
// outside.
TEST(MatmulInt8Block, KernelCalledDirectlyEqualsRowsAlone) {
  if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this host";
  ThreadPool one(1);
  for (DType t : kBlockTypes) {
    const int64_t n_in = 1056, n_out = 31, col_begin = 5, col_end = 28;
    auto w = testing::random_weights(t, n_out, n_in, 16, 5);
    for (int64_t rows : {1, 3, 4, 9, 14}) {
      const Case c{n_in, n_out, rows};
      const int64_t in_stride = n_in + 1, out_stride = n_out + 2;
      auto x = testing::random_input(rows, in_stride, 9 + rows);
      const std::vector<float> want = rows_alone(t, w, c, x, in_stride, out_stride, one);
      const size_t act_row = static_cast<size_t>(n_in / 32) * sizeof(ActBlock32);
      AlignedBuffer<uint8_t> act(act_row * rows);
      for (int64_t r = 0; r < rows; ++r)
        quantize_act_q8_32(x.data() + r * in_stride,
                           reinterpret_cast<ActBlock32*>(act.data() + r * act_row), n_in,
                           ActSign::kUnsigned);
      AlignedBuffer<uint8_t> scratch(
          matmul_detail::int8_block_scratch_bytes(col_end - col_begin, n_in));
      std::vector<float> got(rows * out_stride, -7.f);
      matmul_detail::compute_int8_block_avx512({t, w.bytes.data(), w.row_bytes, n_in, col_begin,
                                                col_end, act.data(), act_row, rows, got.data(),
                                                out_stride, scratch.data()});
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out_stride; ++o) {
          const bool inside = o >= col_begin && o < col_end;
          const float expect = inside ? want[r * out_stride + o] : -7.f;
          ASSERT_EQ(0, std::memcmp(&got[r * out_stride + o], &expect, sizeof(float)))
              << fmt::format("int8 block type={} rows={} row={} column={}: got {} want {}",
                             dtype_name(t), rows, r, o, got[r * out_stride + o], expect);
        }
    }
  }
}

// A group over one input (q/k/v, gate/up: quantized once for all of them) gives each member
// what it gives alone, through the tiles and the blocked kernel, with serial and pooled
// quantization (from 64 rows).
TEST(MatmulInt8Block, GroupOnOneInputEqualsSeparateCalls) {
  ThreadPool two(2);
  const DType types[] = {DType::kQ4_1, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K};
  const int64_t outs[] = {40, 23, 64, 17};
  const int64_t n_in = 512;
  for (int64_t n_rows : {1, 12, 30, 70}) {
    auto x = testing::random_input(n_rows, n_in + 1, 31 + n_rows);
    std::vector<testing::Weights> ws;
    std::vector<std::vector<float>> alone, grouped;
    std::vector<MatmulParams> ps;
    for (size_t g = 0; g < 4; ++g) {
      ws.push_back(testing::random_weights(types[g], outs[g], n_in, 0, static_cast<uint32_t>(3 + g)));
      alone.emplace_back(n_rows * outs[g], -7.f);
      grouped.emplace_back(n_rows * outs[g], -7.f);
    }
    for (size_t g = 0; g < 4; ++g) {
      const Case c{n_in, outs[g], n_rows};
      matmul(int8_params(types[g], ws[g], c, x.data(), n_in + 1, alone[g].data(), outs[g]), two);
      ps.push_back(int8_params(types[g], ws[g], c, x.data(), n_in + 1, grouped[g].data(), outs[g]));
    }
    matmul_group(ps, two);
    for (size_t g = 0; g < 4; ++g)
      EXPECT_EQ(alone[g], grouped[g]) << fmt::format("int8 group on one input: type={} rows={} member {}",
                                                     dtype_name(types[g]), n_rows, g);
  }
}

}  // namespace
}  // namespace deepinfer::kernels
