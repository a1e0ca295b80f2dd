// Host-side checks of the CUDA kernels' params and of the runtime's no-GPU answers: these run
// for real on a machine without a GPU (CUDA builds only).
#include "deepinfer/kernels/cuda/checks.h"

#include <gtest/gtest.h>

#include "deepinfer/kernels/cuda/runtime.h"

namespace deepinfer::cuda {
namespace {

MatmulParams good_matmul(DType t) {
  static float in[64], out[8];
  alignas(8) static uint8_t w[8 * 256];
  MatmulParams p;
  p.weight = w;
  p.weight_type = t;
  p.n_out = 8;
  p.n_in = 64;
  p.weight_row_bytes = row_bytes(t, 64);
  p.input = in;
  p.n_rows = 1;
  p.input_stride = 64;
  p.output = out;
  p.output_stride = 8;
  return p;
}

TEST(CudaChecks, MatmulDispatchTableCoversTheWarpKernelTypesOnly) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_1}) {
    EXPECT_TRUE(warp_matmul_supports(t)) << dtype_name(t);
    EXPECT_TRUE(check_matmul(good_matmul(t)).is_ok())
        << dtype_name(t) << ": " << check_matmul(good_matmul(t)).message();
  }
  for (DType t : {DType::kQ4_0, DType::kQ4_K, DType::kQ6_K, DType::kF8_E4M3}) {
    EXPECT_FALSE(warp_matmul_supports(t)) << dtype_name(t);
    MatmulParams p = good_matmul(DType::kF32);
    p.weight_type = t;
    const Status st = check_matmul(p);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(std::string(dtype_name(t))), std::string::npos) << st.message();
  }
}

TEST(CudaChecks, MatmulRefusesBadShapes) {
  MatmulParams p = good_matmul(DType::kQ4_1);
  p.n_in = 48;  // not whole blocks
  EXPECT_NE(check_matmul(p).message().find("multiple"), std::string::npos);
  p = good_matmul(DType::kQ8_0);
  p.weight_row_bytes -= 1;
  EXPECT_FALSE(check_matmul(p).is_ok());
  p = good_matmul(DType::kF32);
  p.weight_row_bytes += 2;  // rows no longer 4-byte aligned
  EXPECT_NE(check_matmul(p).message().find("aligned"), std::string::npos);
  p = good_matmul(DType::kF16);
  p.input_stride = 63;
  EXPECT_NE(check_matmul(p).message().find("input_stride"), std::string::npos);
  p = good_matmul(DType::kBF16);
  p.output = nullptr;
  EXPECT_FALSE(check_matmul(p).is_ok());
}

TEST(CudaChecks, RowKernels) {
  float buf[16];
  RmsNormParams r;
  r.x = r.y = buf;
  r.rows = 2;
  r.dim = 8;
  r.x_stride = r.y_stride = 8;
  EXPECT_TRUE(check_rms_norm(r).is_ok());
  r.y_stride = 4;
  EXPECT_NE(check_rms_norm(r).message().find("stride"), std::string::npos);

  int32_t pos[1] = {0};
  double inv[4] = {};
  RopeParams q;
  q.x = buf;
  q.n_tokens = 1;
  q.n_heads = 2;
  q.head_dim = 8;
  q.rot_dim = 8;
  q.token_stride = 16;
  q.positions = pos;
  q.inv_freq = inv;
  EXPECT_TRUE(check_rope(q).is_ok());
  q.rot_dim = 7;
  EXPECT_NE(check_rope(q).message().find("rot_dim"), std::string::npos);

  SoftmaxParams s;
  s.x = s.y = buf;
  s.rows = 1;
  s.n = 16;
  EXPECT_TRUE(check_softmax(s).is_ok());
  s.x = nullptr;
  EXPECT_FALSE(check_softmax(s).is_ok());

  EmbeddingParams e;
  e.table = buf;
  e.type = DType::kQ4_K;
  e.dim = 256;
  EXPECT_FALSE(embedding_supports(DType::kQ4_K));
  EXPECT_NE(check_embedding(e).message().find("q4_k"), std::string::npos)
      << check_embedding(e).message();
  e.type = DType::kQ4_1;
  e.dim = 40;
  e.row_bytes = 64;
  EXPECT_NE(check_embedding(e).message().find("multiple"), std::string::npos);
}

TEST(CudaChecks, PagedAttention) {
  float buf[8];
  kernels::AttentionSeq seq{};
  kernels::AttentionParams p{buf, 8,  buf, buf, DType::kF16, 64,  16, 16,   8,
                             2,   64, 64,  0,   0.125f,      buf, 8,  &seq, 1};
  EXPECT_TRUE(check_paged_attention(p, 1).is_ok());
  p.n_kv_heads = 3;
  EXPECT_NE(check_paged_attention(p, 1).message().find("n_kv_heads"), std::string::npos);
  p.n_kv_heads = 2;
  p.kv_type = DType::kQ8_0;
  EXPECT_NE(check_paged_attention(p, 1).message().find("q8_0"), std::string::npos);
  p.kv_type = DType::kBF16;
  p.v_head_dim = kMaxAttentionVDim + 1;
  EXPECT_FALSE(check_paged_attention(p, 1).is_ok());
}

TEST(CudaRuntime, ErrorsNameTheCall) {
  EXPECT_TRUE(cuda_status(cudaSuccess, "cudaFoo").is_ok());
  const Status st = cuda_status(cudaErrorMemoryAllocation, "cudaMalloc(&p, 1 << 40)");
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("cudaMalloc(&p, 1 << 40) failed"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("cudaErrorMemoryAllocation"), std::string::npos) << st.message();
}

// Without a GPU every runtime entry point answers with a Status; none aborts.
TEST(CudaRuntime, NoGpuGivesStatusesNotCrashes) {
  const kernels::GpuProbe p = probe_device();
  if (p.visible)
    GTEST_SKIP() << "a GPU is visible (" << p.name << "): the no-GPU answers are not exercised";
  EXPECT_FALSE(p.reason.empty());
  auto b = DeviceBuffer::allocate(1024);
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.status().message().find("cudaMalloc"), std::string::npos) << b.status().message();
  auto s = Stream::create();
  EXPECT_FALSE(s.is_ok());
  auto empty = DeviceBuffer::allocate(0);
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->data(), nullptr);
}

}  // namespace
}  // namespace deepinfer::cuda
