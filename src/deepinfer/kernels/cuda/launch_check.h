// After a kernel launch: abort naming the kernel when the launch itself failed (bad
// configuration; with validated params that is a bug). Kept free of fmt for nvcc.
#pragma once

#include <cuda_runtime_api.h>

namespace deepinfer::cuda::detail {

[[noreturn]] void launch_failed(const char* kernel, cudaError_t err);

inline void check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) launch_failed(kernel, err);
}

}  // namespace deepinfer::cuda::detail
