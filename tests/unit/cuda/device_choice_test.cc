// Host-side device logic that needs no GPU: the GPU probe's answer and the --device choice.
// Built with and without CUDA; in a build without it, the GPU kernel tests are not compiled and
// one test here reports them as skipped.
#include <gtest/gtest.h>

#include "deepinfer/kernels/device.h"

namespace deepinfer::kernels {
namespace {

GpuProbe fake_gpu() {
  GpuProbe p;
  p.visible = true;
  p.count = 1;
  p.name = "NVIDIA H200";
  p.compute_major = 9;
  return p;
}

GpuProbe no_gpu() {
  GpuProbe p;
  p.reason = "cudaGetDeviceCount: no CUDA-capable device is detected (cudaErrorNoDevice)";
  return p;
}

TEST(GpuProbe, AnswersWithoutCrashingAndExplainsAbsence) {
  const GpuProbe p = probe_gpu();
  EXPECT_EQ(p.visible, p.count > 0 && p.reason.empty());
  if (!p.visible) {
    EXPECT_FALSE(p.reason.empty());
    std::printf("no GPU: %s\n", p.reason.c_str());
  } else {
    EXPECT_FALSE(p.name.empty());
    EXPECT_GT(p.total_bytes, 0u);
  }
  if (!cuda_built()) {
    EXPECT_FALSE(p.visible);
    EXPECT_NE(p.reason.find("no CUDA"), std::string::npos) << p.reason;
  }
}

TEST(ResolveDevice, CpuIsAlwaysCpu) {
  for (const GpuProbe& p : {fake_gpu(), no_gpu()})
    for (bool built : {false, true}) EXPECT_EQ(*resolve_device("cpu", p, built), Device::kCpu);
}

TEST(ResolveDevice, AutoPicksCudaOnlyWithGpuAndEngine) {
  EXPECT_EQ(*resolve_device("auto", fake_gpu(), true), Device::kCuda);
  EXPECT_EQ(*resolve_device("auto", fake_gpu(), false), Device::kCpu);
  EXPECT_EQ(*resolve_device("auto", no_gpu(), true), Device::kCpu);
  EXPECT_EQ(*resolve_device("auto", probe_gpu(), kGpuEngineBuilt),
            Device::kCpu);  // engine not built yet
}

TEST(ResolveDevice, CudaWithoutGpuNamesTheReason) {
  const auto r = resolve_device("cuda", no_gpu(), true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "--device cuda: no GPU visible (" + no_gpu().reason + ")");
}

TEST(ResolveDevice, CudaWithGpuButNoGpuEngineSaysNotBuilt) {
  const auto r = resolve_device("cuda", fake_gpu(), false);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("NVIDIA H200 is visible"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("not built yet"), std::string::npos) << r.status().message();
  EXPECT_EQ(*resolve_device("cuda", fake_gpu(), true), Device::kCuda);
}

TEST(ResolveDevice, RefusesUnknownNames) {
  const auto r = resolve_device("tpu", fake_gpu(), true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'tpu'"), std::string::npos);
  EXPECT_EQ(device_name(Device::kCuda), "cuda");
  EXPECT_EQ(device_name(Device::kCpu), "cpu");
}

TEST(CudaBuild, GpuKernelTestsNeedACudaBuild) {
  if (!cuda_built())
    GTEST_SKIP() << "this build has no CUDA (DEEPINFER_CUDA=OFF or no toolkit): the GPU kernel "
                    "tests are not built";
  SUCCEED();
}

}  // namespace
}  // namespace deepinfer::kernels
