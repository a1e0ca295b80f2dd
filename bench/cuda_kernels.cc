// GPU kernel micro-benchmark for scripts/gpu_check.sh: one JSON object per line on stdout.
// First line: the probe. Exit status 3 (and "no GPU: <reason>" on stderr) when no GPU is
// visible, so the check can never report success without one. Then per shape: warp_matmul
// (Q4_1, Q8_0, BF16) and cuBLASLt (BF16) time per call, achieved GB/s of weight traffic and
// TFLOP/s.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdio>
#include <random>
#include <vector>

#include "deepinfer/kernels/cuda/blas_matmul.h"
#include "deepinfer/kernels/cuda/checks.h"
#include "deepinfer/kernels/cuda/runtime.h"
#include "deepinfer/tensor/quant.h"

namespace dc = deepinfer::cuda;
using deepinfer::DType;

namespace {

// Mean milliseconds of `iters` calls of fn after 3 warm-up calls, timed with CUDA events.
template <typename Fn>
double time_ms(cudaStream_t s, int iters, Fn&& fn) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t a, b;
  DI_CUDA_CHECK(cudaEventCreate(&a));
  DI_CUDA_CHECK(cudaEventCreate(&b));
  DI_CUDA_CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < iters; ++i) fn();
  DI_CUDA_CHECK(cudaEventRecord(b, s));
  DI_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  DI_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

dc::DeviceBuffer must_alloc(size_t bytes) {
  auto b = dc::DeviceBuffer::allocate(bytes);
  DI_CHECK(b.is_ok(), "{}", b.status().message());
  return std::move(*b);
}

void bench_shape(const dc::Stream& stream, dc::BlasMatmul& blas, int64_t n_out, int64_t n_in) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t max_rows = 512;
  std::vector<float> x(max_rows * n_in), row(n_in);
  for (auto& v : x) v = nd(rng);
  dc::DeviceBuffer dx = must_alloc(x.size() * 4), dy = must_alloc(max_rows * n_out * 4);
  dc::DeviceBuffer act = must_alloc(max_rows * n_in * 2);
  DI_CHECK(dc::copy_to_device(dx.data(), x.data(), x.size() * 4, stream).is_ok());
  for (DType t : {DType::kQ4_1, DType::kQ8_0, DType::kBF16}) {
    const size_t rb = deepinfer::row_bytes(t, n_in);
    std::vector<uint8_t> w(rb * n_out);
    for (int64_t o = 0; o < n_out; ++o) {
      for (auto& v : row) v = nd(rng) * 0.02f;
      DI_CHECK(deepinfer::quantize_row(t, row.data(), w.data() + o * rb, n_in).is_ok());
    }
    dc::DeviceBuffer dw = must_alloc(w.size());
    DI_CHECK(dc::copy_to_device(dw.data(), w.data(), w.size(), stream).is_ok());
    DI_CHECK(stream.synchronize().is_ok());
    for (int64_t rows : {1, 8, 64, 512}) {
      dc::MatmulParams p;
      p.weight = dw.data();
      p.weight_type = t;
      p.n_out = n_out;
      p.n_in = n_in;
      p.weight_row_bytes = rb;
      p.input = dx.as<float>();
      p.n_rows = rows;
      p.input_stride = n_in;
      p.output = dy.as<float>();
      p.output_stride = n_out;
      DI_CHECK(dc::check_matmul(p).is_ok());
      auto report = [&](const char* impl, double ms) {
        const double flops = 2.0 * double(rows) * double(n_out) * double(n_in);
        fmt::print(
            "{{\"kernel\": \"matmul\", \"impl\": \"{}\", \"type\": \"{}\", \"n_out\": {}, "
            "\"n_in\": {}, "
            "\"rows\": {}, \"ms\": {:.5f}, \"weight_gb_per_s\": {:.1f}, \"tflop_per_s\": "
            "{:.3f}}}\n",
            impl, deepinfer::dtype_name(t), n_out, n_in, rows, ms,
            double(w.size()) / (ms * 1e-3) / 1e9, flops / (ms * 1e-3) / 1e12);
        std::fflush(stdout);
      };
      report("warp_matmul", time_ms(stream.get(), 20, [&] { dc::warp_matmul(p, stream.get()); }));
      if (t == DType::kBF16) {
        bool ok = true;
        const double ms = time_ms(
            stream.get(), 20, [&] { ok = ok && blas.run(p, act.data(), stream.get()).is_ok(); });
        if (ok) report("cublaslt", ms);
      }
    }
  }
}

}  // namespace

int main() {
  const deepinfer::kernels::GpuProbe probe = dc::probe_device();
  if (!probe.visible) {
    std::fprintf(stderr, "no GPU: %s\n", probe.reason.c_str());
    return 3;
  }
  fmt::print(
      "{{\"gpu\": \"{}\", \"count\": {}, \"compute_capability\": \"{}.{}\", \"memory_gib\": "
      "{:.1f}}}\n",
      probe.name, probe.count, probe.compute_major, probe.compute_minor,
      double(probe.total_bytes) / double(1ull << 30));
  std::fflush(stdout);
  auto stream = dc::Stream::create();
  DI_CHECK(stream.is_ok(), "{}", stream.status().message());
  auto blas = dc::BlasMatmul::create();
  DI_CHECK(blas.is_ok(), "{}", blas.status().message());
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{4096, 4096}, {14336, 4096}, {576, 1536}})
    bench_shape(*stream, *blas, n_out, n_in);
  return 0;
}
