// Greedy argmax and Philox draws on the GPU (sampling.h).
#include "deepinfer/kernels/cuda/launch_check.h"
#include "deepinfer/kernels/cuda/philox.cuh"
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

__global__ void philox_kernel(PhiloxParams p) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= p.n) return;
  const uint64_t seed = p.seed[i], stream = p.stream_id[i], step = p.step[i];
  p.out[i] = detail::philox_uniform_double(seed, stream, step);
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
