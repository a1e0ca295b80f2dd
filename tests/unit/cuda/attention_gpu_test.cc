// GPU paged attention against kernels::attention_reference (materialized scores, double
// softmax): mixed prefill chunks and decode rows, GQA, sliding windows, f32/f16/bf16 KV, shuffled
// block tables. Tolerance (docs/cuda.md): normalized max error < 1e-5 (fp32 online softmax).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "../kernels/kernel_test_util.h"
#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cuda/attention.h"
#include "deepinfer/kernels/cuda/checks.h"
#include "gpu_test_util.h"

namespace deepinfer::cuda {
namespace {

using kernels::testing::max_norm_err;

class CudaAttention : public testing::GpuTest {};

std::vector<uint8_t> random_cache(size_t elems, DType t, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  const size_t eb = t == DType::kF32 ? 4 : 2;
  std::vector<uint8_t> out(elems * eb);
  for (size_t i = 0; i < elems; ++i) {
    const float v = nd(rng);
    if (t == DType::kF32) {
      std::memcpy(&out[i * 4], &v, 4);
    } else {
      const uint16_t h = t == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

TEST_F(CudaAttention, MatchesReference) {
  std::mt19937 rng(11);
  const int block_size = 16, n_heads = 8, n_kv_heads = 2, head_dim = 64, v_head_dim = 64;
  // (first_pos, n_tokens): decode rows and prefill chunks, one crossing many 256-key chunks.
  const std::vector<std::pair<int64_t, int>> shape = {{0, 1}, {36, 1}, {0, 7}, {290, 5}, {700, 1}};
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16})
    for (int window : {0, 50}) {
      int64_t n_blocks = 0;
      for (auto [fp, n] : shape) n_blocks += (fp + n + block_size - 1) / block_size;
      std::vector<int32_t> perm(n_blocks);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      const int64_t token_stride = int64_t{n_kv_heads} * head_dim,
                    block_stride = token_stride * block_size;
      const auto k = random_cache(n_blocks * block_stride, t, rng),
                 v = random_cache(n_blocks * block_stride, t, rng);
      int64_t n_rows = 0;
      for (auto [fp, n] : shape) n_rows += n;
      const int64_t q_stride = int64_t{n_heads} * head_dim,
                    out_stride = int64_t{n_heads} * v_head_dim;
      const auto q = kernels::testing::random_vec(n_rows * q_stride, rng);
      DeviceBuffer dperm = upload(perm), dk = upload(k), dv = upload(v), dq = upload(q);
      DeviceBuffer dout = upload(std::vector<float>(n_rows * out_stride, 0.0f));
      std::vector<kernels::AttentionSeq> host_seqs, dev_seqs;
      int64_t row = 0, blk = 0;
      for (auto [fp, n] : shape) {
        kernels::AttentionSeq s{static_cast<int32_t>(row), n, fp, fp + n, perm.data() + blk};
        host_seqs.push_back(s);
        s.block_table = dperm.as<int32_t>() + blk;
        dev_seqs.push_back(s);
        row += n;
        blk += (fp + n + block_size - 1) / block_size;
      }
      DeviceBuffer dseqs = upload(dev_seqs);
      std::vector<float> want(n_rows * out_stride, 0.0f);
      kernels::AttentionParams p{q.data(),
                                 q_stride,
                                 k.data(),
                                 v.data(),
                                 t,
                                 block_stride,
                                 token_stride,
                                 block_size,
                                 n_heads,
                                 n_kv_heads,
                                 head_dim,
                                 v_head_dim,
                                 window,
                                 0.125f,
                                 want.data(),
                                 out_stride,
                                 host_seqs.data(),
                                 static_cast<int>(host_seqs.size())};
      kernels::attention_reference(p);
      p.q = dq.as<float>();
      p.k_cache = dk.data();
      p.v_cache = dv.data();
      p.out = dout.as<float>();
      p.seqs = dseqs.as<kernels::AttentionSeq>();
      ASSERT_TRUE(check_paged_attention(p, n_rows).is_ok())
          << check_paged_attention(p, n_rows).message();
      paged_attention(p, n_rows, stream());
      const auto got = download<float>(dout, want.size());
      EXPECT_LT(max_norm_err(got.data(), want.data(), got.size()), 1e-5)
          << dtype_name(t) << " window " << window;
    }
}

}  // namespace
}  // namespace deepinfer::cuda
