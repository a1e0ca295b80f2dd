// The GPU probe of the CUDA runtime, in a header free of CUDA's own headers so that
// kernels/device.cc includes it without the toolkit's include path.
#pragma once

#include "deepinfer/kernels/device.h"

namespace deepinfer::cuda {

// Device 0 as the runtime sees it; "no GPU" with the runtime's reason when there is none or the
// driver is missing. Never aborts.
kernels::GpuProbe probe_device();

}  // namespace deepinfer::cuda
