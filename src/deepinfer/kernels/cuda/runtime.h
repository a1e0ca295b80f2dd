// The small device runtime the CUDA kernels run on: the GPU probe, CUDA errors as Status values
// that name the failing call, device buffers (RAII; allocation returns a Result and leaves
// nothing behind on failure) and streams.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "deepinfer/base/check.h"
#include "deepinfer/base/status.h"
#include "deepinfer/kernels/cuda/probe.h"

namespace deepinfer::cuda {

// ok for cudaSuccess, else "<call> failed: <message> (<error name>)". Clears the runtime's
// last-error slot so a later check does not see this error again.
Status cuda_status(cudaError_t err, const char* call);

// Expected failures (out of memory, no device): return the Status from the current function.
#define DI_CUDA_RETURN_IF_ERROR(call) \
  DI_RETURN_IF_ERROR(::deepinfer::cuda::cuda_status((call), #call))
// Broken invariants (a launch with validated params failing): abort, naming the call.
#define DI_CUDA_CHECK(call)                                                                \
  do {                                                                                     \
    const ::deepinfer::Status di_cuda_st_ = ::deepinfer::cuda::cuda_status((call), #call); \
    DI_CHECK(di_cuda_st_.is_ok(), "{}", di_cuda_st_.message());                            \
  } while (0)

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // bytes == 0 gives an empty buffer (data() == nullptr).
  [[nodiscard]] static Result<DeviceBuffer> allocate(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  [[nodiscard]] static Result<Stream> create();
  ~Stream();
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Waits for everything queued; reports the first asynchronous error (a faulting kernel).
  [[nodiscard]] Status synchronize() const;

 private:
  Stream() = default;
  cudaStream_t stream_ = nullptr;
};

// Asynchronous copies on `s`: the host memory must stay valid until s.synchronize().
[[nodiscard]] Status copy_to_device(void* dst, const void* src, size_t bytes, const Stream& s);
[[nodiscard]] Status copy_to_host(void* dst, const void* src, size_t bytes, const Stream& s);

}  // namespace deepinfer::cuda
