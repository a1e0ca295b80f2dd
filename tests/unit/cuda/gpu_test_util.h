// Shared pieces of the GPU kernel tests: a fixture that skips (printing the reason) when no GPU
// is visible, a stream, and host<->device copies of vectors.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "deepinfer/kernels/cuda/runtime.h"
#include "deepinfer/kernels/device.h"

namespace deepinfer::cuda::testing {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const kernels::GpuProbe p = kernels::probe_gpu();
    if (!p.visible) GTEST_SKIP() << "no GPU: " << p.reason;
    auto s = Stream::create();
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    stream_.emplace(std::move(*s));
  }

  cudaStream_t stream() const { return stream_->get(); }

  // A device copy of `v` (bytes as given; vectors of any trivially copyable type).
  template <typename T>
  DeviceBuffer upload(const std::vector<T>& v) {
    auto b = DeviceBuffer::allocate(v.size() * sizeof(T));
    EXPECT_TRUE(b.is_ok()) << b.status().message();
    if (!b.is_ok()) return DeviceBuffer();
    EXPECT_TRUE(copy_to_device(b->data(), v.data(), v.size() * sizeof(T), *stream_).is_ok());
    return std::move(*b);
  }

  template <typename T>
  std::vector<T> download(const DeviceBuffer& b, size_t n) {
    std::vector<T> v(n);
    EXPECT_TRUE(copy_to_host(v.data(), b.data(), n * sizeof(T), *stream_).is_ok());
    const Status st = stream_->synchronize();
    EXPECT_TRUE(st.is_ok()) << st.message();
    return v;
  }

  std::optional<Stream> stream_;
};

}  // namespace deepinfer::cuda::testing
