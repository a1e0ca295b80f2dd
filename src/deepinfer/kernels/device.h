// The compute device an engine runs on (--device) and whether a GPU is visible. probe_gpu()
// asks the NVIDIA driver, opened at run time (gpu_driver_probe.h), in a CUDA build
// (DEEPINFER_CUDA) and answers "no GPU" otherwise; it never aborts, whatever the driver says.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "deepinfer/base/status.h"

namespace deepinfer::kernels {

enum class Device { kCpu, kCuda };

// What the machine offers. visible == (count > 0); reason says why not when it is not.
struct GpuProbe {
  bool visible = false;
  int count = 0;          // devices the runtime reports
  std::string name;       // device 0, e.g. "NVIDIA H200"
  int compute_major = 0;  // device 0's compute capability
  int compute_minor = 0;
  uint64_t total_bytes = 0;  // device 0's memory
  std::string reason;        // "" when visible; else e.g. "no CUDA-capable device is detected"
};

// True when this build has the CUDA back end (kernels/cuda).
bool cuda_built();
GpuProbe probe_gpu();

// Whether the engine's forward pass can run on the GPU. It cannot yet: the kernels exist, the
// device-side weights, paged KV cache and runner do not (docs/cuda.md).
inline constexpr bool kGpuEngineBuilt = false;

// The --device setting: "auto" (cuda when a GPU is visible and the GPU engine is built, else
// cpu), "cpu" or "cuda". "cuda" without a visible GPU, or before the GPU engine exists, is an
// invalid_argument naming the reason.
Result<Device> resolve_device(std::string_view setting, const GpuProbe& probe,
                              bool gpu_engine_built);

std::string_view device_name(Device d);

}  // namespace deepinfer::kernels
