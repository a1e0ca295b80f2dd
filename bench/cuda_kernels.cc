// GPU kernel micro-benchmark for scripts/gpu_check.sh: one JSON object per line on stdout.
// First line: the probe. Exit status 3 (and "no GPU: <reason>" on stderr) when no GPU is
// visible, so the check can never report success without one. Then per shape: warp_matmul
// (Q4_1, Q8_0, BF16) and cuBLASLt (BF16) time per call, achieved GB/s of weight traffic and
// TFLOP/s; then fp8_matmul / fp4_matmul on DeepSeek's expert shapes and grouped_matmul (FP8,
// 32 experts, 8 choices per token), the same measures.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "deepinfer/kernels/cuda/blas_matmul.h"
#include "deepinfer/kernels/cuda/checks.h"
#include "deepinfer/kernels/cuda/moe_matmul.h"
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

void report_row(const char* impl, const char* type, int64_t n_out, int64_t n_in, int64_t rows,
                double weight_bytes, double ms) {
  const double flops = 2.0 * double(rows) * double(n_out) * double(n_in);
  fmt::print(
      "{{\"kernel\": \"matmul\", \"impl\": \"{}\", \"type\": \"{}\", \"n_out\": {}, \"n_in\": {}, "
      "\"rows\": {}, \"ms\": {:.5f}, \"weight_gb_per_s\": {:.1f}, \"tflop_per_s\": {:.3f}}}\n",
      impl, type, n_out, n_in, rows, ms, weight_bytes / (ms * 1e-3) / 1e9,
      flops / (ms * 1e-3) / 1e12);
  std::fflush(stdout);
}

// Random bytes (FP8 NaN codes avoided) for a weight of `bytes`.
std::vector<uint8_t> random_bytes(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(bytes);
  for (auto& b : v) b = static_cast<uint8_t>(rng() % 0x7f);
  return v;
}

dc::DeviceBuffer upload_bytes(const dc::Stream& stream, const void* src, size_t bytes) {
  dc::DeviceBuffer b = must_alloc(bytes);
  DI_CHECK(dc::copy_to_device(b.data(), src, bytes, stream).is_ok());
  return b;
}

// FP8 (128x128 scales) and FP4 (ue8m0 per 32) on one expert-sized weight.
void bench_scaled(const dc::Stream& stream, int64_t n_out, int64_t n_in) {
  const int64_t max_rows = 512;
  const auto x = random_bytes(max_rows * n_in * 4, 3);  // any bits: timing only
  dc::DeviceBuffer dx = upload_bytes(stream, x.data(), x.size()),
                   dy = must_alloc(max_rows * n_out * 4);
  const auto w8 = random_bytes(n_out * n_in, 4);
  const std::vector<float> s8(((n_out + 127) / 128) * ((n_in + 127) / 128), 1.0f / 64);
  const std::vector<uint8_t> s4(n_out * (n_in / 32), 122);
  dc::DeviceBuffer dw8 = upload_bytes(stream, w8.data(), w8.size()),
                   ds8 = upload_bytes(stream, s8.data(), s8.size() * 4),
                   dw4 = upload_bytes(stream, w8.data(), w8.size() / 2),
                   ds4 = upload_bytes(stream, s4.data(), s4.size());
  DI_CHECK(stream.synchronize().is_ok());
  for (int64_t rows : {1, 8, 64, 512}) {
    const dc::Fp8MatmulParams p8{dw8.as<uint8_t>(),
                                 size_t(n_in),
                                 ds8.as<float>(),
                                 (n_in + 127) / 128,
                                 128,
                                 n_out,
                                 n_in,
                                 dx.as<float>(),
                                 rows,
                                 n_in,
                                 dy.as<float>(),
                                 n_out};
    DI_CHECK(dc::check_fp8_matmul(p8).is_ok());
    report_row("fp8_matmul", "fp8_e4m3_b128", n_out, n_in, rows, double(w8.size()),
               time_ms(stream.get(), 20, [&] { dc::fp8_matmul(p8, stream.get()); }));
    const dc::Fp4MatmulParams p4{dw4.as<uint8_t>(),
                                 size_t(n_in / 2),
                                 ds4.as<uint8_t>(),
                                 n_in / 32,
                                 n_out,
                                 n_in,
                                 dx.as<float>(),
                                 rows,
                                 n_in,
                                 dy.as<float>(),
                                 n_out};
    DI_CHECK(dc::check_fp4_matmul(p4).is_ok());
    report_row("fp4_matmul", "fp4_e2m1_ue8m0", n_out, n_in, rows, double(w8.size() / 2),
               time_ms(stream.get(), 20, [&] { dc::fp4_matmul(p4, stream.get()); }));
  }
}

// grouped_matmul, FP8: 32 experts of [2048, 7168] in separate buffers, T tokens x 8 choices
// spread round-robin (so every expert has rows once T >= 4). GB/s counts the weights of the
// experts that have rows, each once.
void bench_grouped(const dc::Stream& stream) {
  const int64_t E = 32, K = 8, n_out = 2048, n_in = 7168;
  const auto w = random_bytes(n_out * n_in, 5);
  const std::vector<float> s(((n_out + 127) / 128) * (n_in / 128), 1.0f / 64);
  std::vector<dc::DeviceBuffer> dw, ds;
  std::vector<const void*> wp, sp;
  for (int64_t e = 0; e < E; ++e) {
    dw.push_back(upload_bytes(stream, w.data(), w.size()));
    ds.push_back(upload_bytes(stream, s.data(), s.size() * 4));
    wp.push_back(dw.back().data());
    sp.push_back(ds.back().data());
  }
  dc::DeviceBuffer dwp = upload_bytes(stream, wp.data(), wp.size() * sizeof(void*)),
                   dsp = upload_bytes(stream, sp.data(), sp.size() * sizeof(void*));
  for (int64_t T : {1, 16, 128}) {
    const int64_t n = T * K;
    std::vector<int64_t> offsets(E + 1, 0);
    for (int64_t i = 0; i < n; ++i) ++offsets[i % E + 1];
    int64_t max_rows = 0;
    for (int64_t e = 0; e < E; ++e) max_rows = std::max(max_rows, offsets[e + 1]);
    for (int64_t e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
    std::vector<int32_t> rows(n);
    for (int64_t j = 0; j < n; ++j) rows[j] = static_cast<int32_t>(j % T);
    const auto x = random_bytes(T * n_in * 4, 6);
    dc::DeviceBuffer doff = upload_bytes(stream, offsets.data(), offsets.size() * 8),
                     drows = upload_bytes(stream, rows.data(), rows.size() * 4),
                     dx = upload_bytes(stream, x.data(), x.size()), dy = must_alloc(n * n_out * 4);
    dc::GroupedMatmulParams p;
    p.format = dc::GroupedWeight::kFp8Block;
    p.weights = dwp.as<const void*>();
    p.scales = dsp.as<const void*>();
    p.weight_row_bytes = n_in;
    p.scale_stride = n_in / 128;
    p.n_groups = E;
    p.n_out = n_out;
    p.n_in = n_in;
    p.group_offsets = doff.as<int64_t>();
    p.input_rows = drows.as<int32_t>();
    p.input = dx.as<float>();
    p.input_stride = n_in;
    p.n_rows = n;
    p.max_group_rows = max_rows;
    p.output = dy.as<float>();
    p.output_stride = n_out;
    DI_CHECK(dc::check_grouped_matmul(p).is_ok());
    const int64_t active = std::min(E, n);
    report_row("grouped_matmul", "fp8_e4m3_b128_e32_k8", n_out, n_in, n,
               double(active * n_out * n_in),
               time_ms(stream.get(), 10, [&] { dc::grouped_matmul(p, stream.get()); }));
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
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{2048, 7168}, {7168, 2048}})
    bench_scaled(*stream, n_out, n_in);
  bench_grouped(*stream);
  return 0;
}
