// Asks the NVIDIA driver (libcuda.so.1, opened at run time) whether a GPU is visible, so that
// programs need neither the CUDA runtime nor cuBLAS at load time to answer --device (the
// deepinfer binary links no CUDA library until its engine runs on the GPU).
#pragma once

#include "deepinfer/kernels/device.h"

namespace deepinfer::kernels {

// Never aborts: a missing driver library, a failing cuInit or no device is a GpuProbe with
// visible = false and the reason.
GpuProbe probe_gpu_driver();

}  // namespace deepinfer::kernels
