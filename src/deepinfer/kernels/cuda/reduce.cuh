// Block-wide reductions with one fixed order (a shared-memory tree over kThreads partials, each
// partial a strided loop in index order): the result depends only on the row, never on how many
// rows the launch holds or where the row sits.
#pragma once

namespace deepinfer::cuda::detail {

constexpr int kThreads = 256;  // threads per row block

template <typename T>
__device__ __forceinline__ T block_sum(T v, T* smem /* [kThreads] */) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s)
      smem[threadIdx.x] = smem[threadIdx.x] + smem[threadIdx.x + s];
    __syncthreads();
  }
  const T total = smem[0];
  __syncthreads();  // smem may be reused right away
  return total;
}

__device__ __forceinline__ float block_max(float v, float* smem /* [kThreads] */) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s)
      smem[threadIdx.x] = fmaxf(smem[threadIdx.x], smem[threadIdx.x + s]);
    __syncthreads();
  }
  const float m = smem[0];
  __syncthreads();
  return m;
}

}  // namespace deepinfer::cuda::detail
