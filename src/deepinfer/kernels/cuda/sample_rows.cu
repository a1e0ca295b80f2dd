// sample_rows (sampling.h): the launcher of sample_rows_kernel.cuh's kernel, one block per row.
#include "deepinfer/kernels/cuda/launch_check.h"
#include "deepinfer/kernels/cuda/sample_rows_kernel.cuh"

namespace deepinfer::cuda {

void sample_rows(const SampleParams& p, cudaStream_t stream) {
  if (p.rows <= 0) return;
  detail::sampler::sample_kernel<<<static_cast<unsigned>(p.rows), detail::kThreads, 0, stream>>>(p);
  detail::check_launch("sample_rows");
}

}  // namespace deepinfer::cuda
