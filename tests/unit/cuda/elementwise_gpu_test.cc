// The CUDA row kernels against the CPU scalar references over many shapes. Tolerances (also in
// docs/cuda.md): embedding bitwise; SiLU/SwiGLU, RMSNorm, RoPE and softmax within 1e-6
// normalized error (the row reductions run in another order, and the device's exp, sin and cos
// may differ from glibc's in the last bit).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../kernels/kernel_test_util.h"
#include "deepinfer/kernels/cpu/activation.h"
#include "deepinfer/kernels/cpu/embedding.h"
#include "deepinfer/kernels/cpu/rms_norm.h"
#include "deepinfer/kernels/cpu/rope.h"
#include "deepinfer/kernels/cpu/softmax.h"
#include "deepinfer/kernels/cuda/checks.h"
#include "deepinfer/kernels/cuda/elementwise.h"
#include "deepinfer/tensor/quant.h"
#include "gpu_test_util.h"

namespace deepinfer::cuda {
namespace {

using kernels::testing::max_norm_err;
using kernels::testing::max_rel_err;
using kernels::testing::random_vec;

class CudaElementwise : public testing::GpuTest {};

TEST_F(CudaElementwise, RmsNormMatchesReference) {
  std::mt19937 rng(1);
  for (int64_t rows : {1, 3, 17, 64})
    for (int64_t dim : {1, 7, 64, 255, 576, 4096, 5000})
      for (bool weighted : {true, false}) {
        const int64_t stride = dim + 3;
        auto x = random_vec(rows * stride, rng, -3, 3);
        auto w = random_vec(dim, rng, 0.5f, 1.5f);
        std::vector<float> want(rows * stride, 0.0f);
        kernels::rms_norm_reference({x.data(), weighted ? w.data() : nullptr, want.data(), rows,
                                     dim, stride, stride, 1e-5f});
        DeviceBuffer dx = upload(x), dw = upload(w),
                     dy = upload(std::vector<float>(rows * stride, 0.0f));
        RmsNormParams p;
        p.x = dx.as<float>();
        p.w = weighted ? dw.as<float>() : nullptr;
        p.y = dy.as<float>();
        p.rows = rows;
        p.dim = dim;
        p.x_stride = p.y_stride = stride;
        p.eps = 1e-5f;
        ASSERT_TRUE(check_rms_norm(p).is_ok());
        rms_norm(p, stream());
        const auto got = download<float>(dy, rows * stride);
        EXPECT_LT(max_norm_err(got.data(), want.data(), got.size()), 1e-6)
            << "rows " << rows << " dim " << dim << " weighted " << weighted;
      }
}

TEST_F(CudaElementwise, RopeMatchesReference) {
  std::mt19937 rng(2);
  kernels::RopeScaling yarn;
  yarn.type = kernels::RopeScalingType::kYarn;
  yarn.factor = 4.0f;
  yarn.original_max_pos = 4096;
  for (auto layout : {kernels::RopeLayout::kHalf, kernels::RopeLayout::kInterleaved})
    for (const kernels::RopeScaling& scaling : {kernels::RopeScaling{}, yarn})
      for (int head_dim : {64, 128})
        for (int rot_dim : {head_dim, head_dim / 2})
          for (int64_t n_tokens : {1, 5, 33}) {
            const int n_heads = 3;
            const int64_t stride = n_heads * head_dim + 8;
            auto x = random_vec(n_tokens * stride, rng);
            std::vector<int32_t> pos(n_tokens);
            for (auto& v : pos) v = static_cast<int32_t>(rng() % 100000);
            std::vector<float> want = x;
            kernels::RopeParams cp{want.data(), n_tokens,   n_heads,  head_dim, rot_dim,
                                   stride,      pos.data(), 10000.0f, layout,   scaling};
            kernels::rope_reference(cp);
            std::vector<double> inv(rot_dim / 2);
            kernels::rope_inv_freq(scaling, 10000.0f, rot_dim, inv.data());
            DeviceBuffer dx = upload(x), dpos = upload(pos), dinv = upload(inv);
            RopeParams p;
            p.x = dx.as<float>();
            p.n_tokens = n_tokens;
            p.n_heads = n_heads;
            p.head_dim = head_dim;
            p.rot_dim = rot_dim;
            p.token_stride = stride;
            p.positions = dpos.as<int32_t>();
            p.inv_freq = dinv.as<double>();
            p.cos_sin_scale = kernels::rope_cos_sin_scale(scaling);
            p.layout = layout;
            ASSERT_TRUE(check_rope(p).is_ok());
            rope(p, stream());
            const auto got = download<float>(dx, x.size());
            EXPECT_LT(max_norm_err(got.data(), want.data(), got.size()), 1e-6)
                << "layout " << int(layout) << " scaling " << int(scaling.type) << " head_dim "
                << head_dim << " rot_dim " << rot_dim << " n_tokens " << n_tokens;
          }
}

TEST_F(CudaElementwise, SiluAndSwigluMatchReference) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 31, 256, 1000, 70001}) {
    auto g = random_vec(n, rng, -12, 12), u = random_vec(n, rng, -2, 2);
    std::vector<float> want_silu(n), want_swiglu(n);
    kernels::silu_reference(g.data(), want_silu.data(), n);
    kernels::swiglu_reference(g.data(), u.data(), want_swiglu.data(), n);
    DeviceBuffer dg = upload(g), du = upload(u), d1 = upload(std::vector<float>(n)),
                 d2 = upload(std::vector<float>(n));
    silu(dg.as<float>(), d1.as<float>(), n, stream());
    swiglu(dg.as<float>(), du.as<float>(), d2.as<float>(), n, stream());
    const auto got1 = download<float>(d1, n), got2 = download<float>(d2, n);
    EXPECT_LT(max_rel_err(got1.data(), want_silu.data(), n), 1e-6) << "silu n " << n;
    EXPECT_LT(max_rel_err(got2.data(), want_swiglu.data(), n), 1e-6) << "swiglu n " << n;
  }
}

TEST_F(CudaElementwise, SoftmaxMatchesReference) {
  std::mt19937 rng(4);
  for (int64_t rows : {1, 4, 33})
    for (int64_t n : {1, 2, 100, 1024, 49152, 151936})
      for (float scale : {1.0f, 0.7f}) {
        const int64_t stride = n + 1;
        auto x = random_vec(rows * stride, rng, -20, 20);
        for (int64_t i = 0; i < n; i += 7) x[i] = -INFINITY;  // masked entries
        if (rows > 1)
          for (int64_t i = 0; i < n; ++i) x[stride + i] = -INFINITY;  // a fully masked row
        std::vector<float> want(rows * stride, 0.0f);
        for (int64_t r = 0; r < rows; ++r)
          kernels::softmax_reference(&x[r * stride], &want[r * stride], n, scale);
        DeviceBuffer dx = upload(x), dy = upload(std::vector<float>(rows * stride, 0.0f));
        SoftmaxParams p;
        p.x = dx.as<float>();
        p.y = dy.as<float>();
        p.rows = rows;
        p.n = n;
        p.x_stride = p.y_stride = stride;
        p.scale = scale;
        ASSERT_TRUE(check_softmax(p).is_ok());
        softmax(p, stream());
        const auto got = download<float>(dy, rows * stride);
        EXPECT_LT(max_norm_err(got.data(), want.data(), got.size()), 1e-6)
            << "rows " << rows << " n " << n;
      }
}

TEST_F(CudaElementwise, EmbeddingIsBitwiseTheCpuDequantization) {
  std::mt19937 rng(5);
  const int64_t vocab = 50;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_1})
    for (int64_t dim : {32, 64, 576}) {
      const size_t rb = row_bytes(t, dim);
      std::vector<uint8_t> table(rb * vocab);
      for (int64_t v = 0; v < vocab; ++v) {
        auto row = random_vec(dim, rng, -2, 2);
        ASSERT_TRUE(quantize_row(t, row.data(), table.data() + v * rb, dim).is_ok());
      }
      std::vector<int32_t> ids = {0, 49, 7, 7, 23};
      std::vector<float> want(ids.size() * dim);
      kernels::embedding_lookup(table.data(), t, rb, dim, ids.data(), int64_t(ids.size()),
                                want.data());
      DeviceBuffer dt = upload(table), di = upload(ids),
                   dout = upload(std::vector<float>(want.size()));
      EmbeddingParams p;
      p.table = dt.data();
      p.type = t;
      p.row_bytes = rb;
      p.dim = dim;
      p.ids = di.as<int32_t>();
      p.n = int64_t(ids.size());
      p.out = dout.as<float>();
      ASSERT_TRUE(check_embedding(p).is_ok()) << check_embedding(p).message();
      embedding_lookup(p, stream());
      const auto got = download<float>(dout, want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << dtype_name(t) << " dim " << dim;
    }
}

}  // namespace
}  // namespace deepinfer::cuda
