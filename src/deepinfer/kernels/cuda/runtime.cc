// Device runtime: probe, errors, buffers, streams (see runtime.h).
#include "deepinfer/kernels/cuda/runtime.h"

#include <cstdlib>
#include <utility>

#include "deepinfer/kernels/cuda/launch_check.h"

namespace deepinfer::cuda {

Status cuda_status(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::ok();
  (void)cudaGetLastError();  // reset the non-sticky last error; sticky ones stay regardless
  return {StatusCode::kInternal,
          fmt::format("{} failed: {} ({})", call, cudaGetErrorString(err), cudaGetErrorName(err))};
}

kernels::GpuProbe probe_device() {
  kernels::GpuProbe p;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // No driver, no device, a driver older than the runtime: all answered the same way.
    (void)cudaGetLastError();
    p.reason =
        fmt::format("cudaGetDeviceCount: {} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
    return p;
  }
  p.count = count;
  if (count <= 0) {
    p.reason = "the CUDA runtime reports no device";
    return p;
  }
  cudaDeviceProp prop{};
  const cudaError_t perr = cudaGetDeviceProperties(&prop, 0);
  if (perr != cudaSuccess) {
    (void)cudaGetLastError();
    p.reason = fmt::format("cudaGetDeviceProperties(0): {} ({})", cudaGetErrorString(perr),
                           cudaGetErrorName(perr));
    return p;
  }
  p.visible = true;
  p.name = prop.name;
  p.compute_major = prop.major;
  p.compute_minor = prop.minor;
  p.total_bytes = prop.totalGlobalMem;
  return p;
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) {
    Status st = cuda_status(err, "cudaMalloc");
    return Status(err == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted : st.code(),
                  fmt::format("{} ({} bytes)", st.message(), bytes));
  }
  b.ptr_ = ptr;
  b.bytes_ = bytes;
  return b;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (void)cudaFree(ptr_);  // nothing useful to do with a failure while freeing
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Result<Stream> Stream::create() {
  Stream s;
  DI_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  return s;
}

Stream::~Stream() {
  if (stream_) (void)cudaStreamDestroy(stream_);
}

Stream::Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (stream_) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}

Status Stream::synchronize() const {
  return cuda_status(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

Status copy_to_device(void* dst, const void* src, size_t bytes, const Stream& s) {
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.get()),
                     "cudaMemcpyAsync(host to device)");
}

Status copy_to_host(void* dst, const void* src, size_t bytes, const Stream& s) {
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s.get()),
                     "cudaMemcpyAsync(device to host)");
}

}  // namespace deepinfer::cuda

namespace deepinfer::cuda::detail {

void launch_failed(const char* kernel, cudaError_t err) {
  DI_CHECK(false, "launching {} failed: {} ({})", kernel, cudaGetErrorString(err),
           cudaGetErrorName(err));
  std::abort();
}

}  // namespace deepinfer::cuda::detail
