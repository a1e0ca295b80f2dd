// The driver API calls are looked up by name (dlsym), declared here by their documented C
// signatures (CUresult and CUdevice are ints), so no CUDA header is needed.
#include "deepinfer/kernels/gpu_driver_probe.h"

#include <dlfcn.h>

#include <cstddef>

#include <fmt/format.h>

namespace deepinfer::kernels {
namespace {

using CuInit = int (*)(unsigned int);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);
using CuDeviceTotalMem = int (*)(size_t*, int);
using CuGetErrorName = int (*)(int, const char**);

constexpr int kComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

struct Driver {
  void* lib = nullptr;
  ~Driver() {
    if (lib != nullptr) dlclose(lib);
  }
  template <typename Fn>
  Fn get(const char* name) const {
    return reinterpret_cast<Fn>(dlsym(lib, name));
  }
  std::string error(const char* call, int rc) const {
    const char* name = nullptr;
    if (auto f = get<CuGetErrorName>("cuGetErrorName"); f == nullptr || f(rc, &name) != 0 || name == nullptr)
      name = "unknown error";
    return fmt::format("{}: {} ({})", call, name, rc);
  }
};

}  // namespace

GpuProbe probe_gpu_driver() {
  GpuProbe p;
  Driver d;
  d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (d.lib == nullptr) {
    const char* why = dlerror();
    p.reason = fmt::format("the NVIDIA driver library libcuda.so.1 could not be opened ({})",
                           why != nullptr ? why : "no reason given");
    return p;
  }
  const auto init = d.get<CuInit>("cuInit");
  const auto count = d.get<CuDeviceGetCount>("cuDeviceGetCount");
  const auto device = d.get<CuDeviceGet>("cuDeviceGet");
  const auto name = d.get<CuDeviceGetName>("cuDeviceGetName");
  const auto attribute = d.get<CuDeviceGetAttribute>("cuDeviceGetAttribute");
  const auto memory = d.get<CuDeviceTotalMem>("cuDeviceTotalMem_v2");
  if (!init || !count || !device || !name || !attribute || !memory) {
    p.reason = "libcuda.so.1 lacks a driver API call this probe needs (cuInit, cuDeviceGet*)";
    return p;
  }
  if (const int rc = init(0); rc != 0) {
    p.reason = d.error("cuInit", rc);
    return p;
  }
  if (const int rc = count(&p.count); rc != 0) {
    p.reason = d.error("cuDeviceGetCount", rc);
    p.count = 0;
    return p;
  }
  if (p.count == 0) {
    p.reason = "the NVIDIA driver reports no CUDA device";
    return p;
  }
  int dev = 0;
  char buf[256] = {};
  size_t bytes = 0;
  if (const int rc = device(&dev, 0); rc != 0) {
    p.reason = d.error("cuDeviceGet", rc);
    return p;
  }
  if (name(buf, sizeof(buf) - 1, dev) == 0) p.name = buf;
  (void)attribute(&p.compute_major, kComputeCapabilityMajor, dev);
  (void)attribute(&p.compute_minor, kComputeCapabilityMinor, dev);
  if (memory(&bytes, dev) == 0) p.total_bytes = bytes;
  p.visible = true;
  return p;
}

}  // namespace deepinfer::kernels
