// Greedy argmax and Philox draws on the GPU (sampling.h).
#include "deepinfer/kernels/cuda/launch_check.h"
#include "deepinfer/kernels/cuda/reduce.cuh"
#include "deepinfer/kernels/cuda/sampling.h"

namespace deepinfer::cuda {
namespace {

using detail::kThreads;

// (logit desc, id asc): a total order, so the block's answer does not depend on which thread
// saw which element.
__device__ __forceinline__ bool better(float a, int32_t ia, float b, int32_t ib) {
  return a > b || (a == b && ia < ib);
}

__global__ void argmax_kernel(ArgmaxParams p) {
  __shared__ float best_v[kThreads];
  __shared__ int32_t best_i[kThreads];
  const float* x = p.logits + blockIdx.x * p.stride;
  float v = -INFINITY;
  int32_t id = -1;
  for (int64_t i = threadIdx.x; i < p.vocab; i += kThreads) {
    const float l = isnan(x[i]) ? -INFINITY : x[i];
    if (l > -INFINITY && (id < 0 || better(l, static_cast<int32_t>(i), v, id))) {
      v = l;
      id = static_cast<int32_t>(i);
    }
  }
  best_v[threadIdx.x] = v;
  best_i[threadIdx.x] = id;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      const int o = threadIdx.x + s;
      if (best_i[o] >= 0 &&
          (best_i[threadIdx.x] < 0 ||
           better(best_v[o], best_i[o], best_v[threadIdx.x], best_i[threadIdx.x]))) {
        best_v[threadIdx.x] = best_v[o];
        best_i[threadIdx.x] = best_i[o];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) p.tokens[blockIdx.x] = best_i[0];
}

// Philox4x32-10 exactly as base/philox.h (Salmon et al., SC'11).
__device__ __forceinline__ void philox4x32_10(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    const uint32_t c0 = static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ k0,
                   c1 = static_cast<uint32_t>(p1);
    const uint32_t c2 = static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ k1,
                   c3 = static_cast<uint32_t>(p0);
    ctr[0] = c0;
    ctr[1] = c1;
    ctr[2] = c2;
    ctr[3] = c3;
  }
}

__global__ void philox_kernel(PhiloxParams p) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= p.n) return;
  const uint64_t seed = p.seed[i], stream = p.stream_id[i], step = p.step[i];
  uint32_t w[4] = {static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32),
                   static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)};
  philox4x32_10(w, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits = (static_cast<uint64_t>(w[0]) << 21) ^ (w[1] >> 11);
  p.out[i] = static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * 0x1.0p-53;
}

}  // namespace

void argmax_rows(const ArgmaxParams& p, cudaStream_t stream) {
  if (p.rows <= 0) return;
  argmax_kernel<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  detail::check_launch("argmax_rows");
}

void philox_uniform_double(const PhiloxParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  philox_kernel<<<static_cast<unsigned>((p.n + 255) / 256), 256, 0, stream>>>(p);
  detail::check_launch("philox_uniform_double");
}

}  // namespace deepinfer::cuda
