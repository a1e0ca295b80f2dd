// --device resolution and the GPU probe (the NVIDIA driver's answer, or "no CUDA in this build").
#include "deepinfer/kernels/device.h"

#include "deepinfer/kernels/gpu_driver_probe.h"

namespace deepinfer::kernels {

bool cuda_built() {
#if DEEPINFER_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

GpuProbe probe_gpu() {
#if DEEPINFER_HAVE_CUDA
  return probe_gpu_driver();
#else
  GpuProbe p;
  p.reason =
      "this build has no CUDA back end (built with DEEPINFER_CUDA=OFF or without the CUDA toolkit)";
  return p;
#endif
}

Result<Device> resolve_device(std::string_view setting, const GpuProbe& probe,
                              bool gpu_engine_built) {
  if (setting == "cpu") return Device::kCpu;
  if (setting == "auto") return probe.visible && gpu_engine_built ? Device::kCuda : Device::kCpu;
  if (setting != "cuda")
    return invalid_argument("--device must be auto, cpu or cuda, got '{}'", setting);
  if (!probe.visible) return invalid_argument("--device cuda: no GPU visible ({})", probe.reason);
  if (!gpu_engine_built)
    return invalid_argument(
        "--device cuda: {} is visible, but the engine's GPU forward pass (weights and paged KV "
        "cache "
        "in device memory, the runner issuing kernels on a stream) is not built yet (issue 27, "
        "docs/cuda.md); use --device cpu",
        probe.name);
  return Device::kCuda;
}

std::string_view device_name(Device d) { return d == Device::kCuda ? "cuda" : "cpu"; }

}  // namespace deepinfer::kernels
