// Host-side checks of the FP8/FP4 matmuls, the grouped (MoE) matmul and the device sampler's
// params, and make_sample_row's arithmetic: these run for real without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "deepinfer/kernels/cuda/checks.h"

namespace deepinfer::cuda {
namespace {

bool names(const Status& st, const std::string& what) {
  return !st.is_ok() && st.message().find(what) != std::string::npos;
}

Fp8MatmulParams good_fp8() {
  static uint8_t w[256 * 300];
  static float s[2 * 3], in[2 * 300], out[2 * 256];
  Fp8MatmulParams p;
  p.weight = w;
  p.weight_row_bytes = 300;
  p.scale_inv = s;
  p.scale_stride = 3;
  p.block = 128;
  p.n_out = 256;
  p.n_in = 300;
  p.input = in;
  p.n_rows = 2;
  p.input_stride = 300;
  p.output = out;
  p.output_stride = 256;
  return p;
}

Fp4MatmulParams good_fp4() {
  static uint8_t w[8 * 48], s[8 * 3];
  static float in[96], out[8];
  Fp4MatmulParams p;
  p.weight = w;
  p.weight_row_bytes = 48;
  p.scale = s;
  p.scale_stride = 3;
  p.n_out = 8;
  p.n_in = 96;
  p.input = in;
  p.n_rows = 1;
  p.input_stride = 96;
  p.output = out;
  p.output_stride = 8;
  return p;
}

TEST(CudaChecks, Fp8MatmulNamesTheBadField) {
  EXPECT_TRUE(check_fp8_matmul(good_fp8()).is_ok()) << check_fp8_matmul(good_fp8()).message();
  Fp8MatmulParams p = good_fp8();
  p.block = 48;  // the CPU takes it; a lane's 32-input chunk would straddle two scales
  EXPECT_TRUE(names(check_fp8_matmul(p), "block 48")) << check_fp8_matmul(p).message();
  p = good_fp8();
  p.block = 32;
  p.scale_stride = 9;  // ceil(300 / 32) = 10
  EXPECT_TRUE(names(check_fp8_matmul(p), "scale_stride 9")) << check_fp8_matmul(p).message();
  p = good_fp8();
  p.weight_row_bytes = 299;
  EXPECT_TRUE(names(check_fp8_matmul(p), "weight_row_bytes"));
  p = good_fp8();
  p.input_stride = 299;
  EXPECT_TRUE(names(check_fp8_matmul(p), "input_stride"));
  p = good_fp8();
  p.scale_inv = nullptr;
  EXPECT_TRUE(names(check_fp8_matmul(p), "scale_inv"));
  p.n_rows = 0;  // nothing to do: nothing is read
  EXPECT_TRUE(check_fp8_matmul(p).is_ok());
}

TEST(CudaChecks, Fp4MatmulNamesTheBadField) {
  EXPECT_TRUE(check_fp4_matmul(good_fp4()).is_ok()) << check_fp4_matmul(good_fp4()).message();
  Fp4MatmulParams p = good_fp4();
  p.n_in = 95;
  p.input_stride = 95;
  EXPECT_TRUE(names(check_fp4_matmul(p), "even"));
  p = good_fp4();
  p.weight_row_bytes = 47;
  EXPECT_TRUE(names(check_fp4_matmul(p), "weight_row_bytes 47"));
  p = good_fp4();
  p.scale_stride = 2;
  EXPECT_TRUE(names(check_fp4_matmul(p), "scale_stride 2"));
  p = good_fp4();
  p.output_stride = 7;
  EXPECT_TRUE(names(check_fp4_matmul(p), "output_stride"));
}

GroupedMatmulParams good_grouped(GroupedWeight f) {
  static const void* ptrs[4] = {};
  static int64_t offsets[5] = {};
  static float in[64 * 8], out[8 * 16];
  GroupedMatmulParams p;
  p.format = f;
  p.weights = ptrs;
  p.scales = ptrs;
  p.n_groups = 4;
  p.n_out = 16;
  p.n_in = 64;
  p.weight_row_bytes = f == GroupedWeight::kFp4 ? 32 : 64 * 4;
  p.scale_stride = f == GroupedWeight::kFp4 ? 2 : 1;
  p.block = 128;
  p.group_offsets = offsets;
  p.input = in;
  p.input_stride = 64;
  p.n_rows = 8;
  p.output = out;
  p.output_stride = 16;
  return p;
}

TEST(CudaChecks, GroupedMatmulNamesTheBadField) {
  for (GroupedWeight f :
       {GroupedWeight::kF32, GroupedWeight::kF16, GroupedWeight::kBF16, GroupedWeight::kQ8_0,
        GroupedWeight::kQ4_1, GroupedWeight::kFp8Block, GroupedWeight::kFp4})
    EXPECT_TRUE(check_grouped_matmul(good_grouped(f)).is_ok())
        << int(f) << ": " << check_grouped_matmul(good_grouped(f)).message();
  GroupedMatmulParams p = good_grouped(GroupedWeight::kQ4_1);
  p.n_in = 48;
  p.input_stride = 48;
  EXPECT_TRUE(names(check_grouped_matmul(p), "q4_1 block")) << check_grouped_matmul(p).message();
  p = good_grouped(GroupedWeight::kF32);
  p.weight_row_bytes = 64 * 4 + 2;
  EXPECT_TRUE(names(check_grouped_matmul(p), "alignment")) << check_grouped_matmul(p).message();
  p = good_grouped(GroupedWeight::kFp8Block);
  p.block = 16;
  EXPECT_TRUE(names(check_grouped_matmul(p), "block 16"));
  p = good_grouped(GroupedWeight::kFp4);
  p.scales = nullptr;
  EXPECT_TRUE(names(check_grouped_matmul(p), "scales"));
  p = good_grouped(GroupedWeight::kBF16);
  p.scales = nullptr;  // not needed for BF16
  EXPECT_TRUE(check_grouped_matmul(p).is_ok());
  p.n_groups = 0;
  EXPECT_TRUE(names(check_grouped_matmul(p), "n_groups 0"));
  p = good_grouped(GroupedWeight::kBF16);
  p.n_groups = 65536;
  EXPECT_TRUE(names(check_grouped_matmul(p), "n_groups 65536"));
  p = good_grouped(GroupedWeight::kBF16);
  p.max_group_rows = 9;
  EXPECT_TRUE(names(check_grouped_matmul(p), "max_group_rows 9"));
  p = good_grouped(GroupedWeight::kBF16);
  p.group_offsets = nullptr;
  EXPECT_TRUE(names(check_grouped_matmul(p), "group_offsets"));
  p = good_grouped(GroupedWeight::kBF16);
  p.format = static_cast<GroupedWeight>(42);
  EXPECT_TRUE(names(check_grouped_matmul(p), "format 42"));
}

// The values the CPU sampler computes from its parameters, bit for bit (engine/sampler.cc).
TEST(CudaSampleRow, HostArithmeticIsTheCpuSamplers) {
  const SampleRow r = make_sample_row(0.7f, 40, 0.9f, 0.05f, 11, 22, 33);
  EXPECT_EQ(r.inv_temperature, 1.0f / 0.7f);
  EXPECT_EQ(r.log_min_p, std::log(0.05f));
  EXPECT_TRUE(r.use_min_p);
  EXPECT_FALSE(r.greedy);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.seed, 11u);
  EXPECT_EQ(r.stream_id, 22u);
  EXPECT_EQ(r.step, 33u);
  EXPECT_TRUE(make_sample_row(0.0f, 0, 1.0f, 0.0f, 0, 0, 0).greedy);
  EXPECT_TRUE(make_sample_row(9e-6f, 0, 1.0f, 0.0f, 0, 0, 0).greedy);  // below 1e-5
  EXPECT_FALSE(make_sample_row(1e-5f, 0, 1.0f, 0.0f, 0, 0, 0).greedy);
  EXPECT_TRUE(make_sample_row(1.0f, 1, 1.0f, 0.0f, 0, 0, 0).greedy);  // top_k 1
  EXPECT_FALSE(make_sample_row(1.0f, 0, 1.0f, 0.0f, 0, 0, 0).use_min_p);
  EXPECT_EQ(sample_scratch_elems(1), 1);
  EXPECT_EQ(sample_scratch_elems(151936), 262144);
  EXPECT_EQ(sample_scratch_elems(65536), 65536);
}

TEST(CudaChecks, SampleRowsNamesTheBadField) {
  static float logits[2 * 100];
  static SampleRow rows[2];
  static uint64_t scratch[2 * 128];
  static int32_t tokens[2];
  SampleParams p{logits, 2, 100, 100, rows, scratch, 128, tokens};
  EXPECT_TRUE(check_sample_rows(p).is_ok()) << check_sample_rows(p).message();
  p.scratch_stride = 100;  // needs 128 for the bitonic sort
  EXPECT_TRUE(names(check_sample_rows(p), "scratch_stride 100")) << check_sample_rows(p).message();
  p = {logits, 2, 100, 99, rows, scratch, 128, tokens};
  EXPECT_TRUE(names(check_sample_rows(p), "stride 99"));
  p = {logits, 2, 0, 100, rows, scratch, 128, tokens};
  EXPECT_TRUE(names(check_sample_rows(p), "vocab 0"));
  p = {logits, 2, 100, 100, nullptr, scratch, 128, tokens};
  EXPECT_TRUE(names(check_sample_rows(p), "row_params"));

  EXPECT_TRUE(check_sample_row(make_sample_row(0.8f, 5, 0.9f, 0.1f, 1, 2, 3)).is_ok());
  SampleRow r = make_sample_row(0.8f, 5, 0.9f, 0.1f, 1, 2, 3);
  r.top_p = 0.0f;
  EXPECT_TRUE(names(check_sample_row(r), "top_p"));
  r = make_sample_row(0.8f, -2, 0.9f, 0.1f, 1, 2, 3);
  EXPECT_TRUE(names(check_sample_row(r), "top_k -2"));
  r = make_sample_row(0.8f, 5, 0.9f, 0.1f, 1, 2, 3);
  r.inv_temperature = INFINITY;
  EXPECT_TRUE(names(check_sample_row(r), "inv_temperature"));
  r = make_sample_row(0.8f, 5, 0.9f, 0.1f, 1, 2, 3);
  r.log_min_p = 0.5f;
  EXPECT_TRUE(names(check_sample_row(r), "log_min_p"));
}

}  // namespace
}  // namespace deepinfer::cuda
