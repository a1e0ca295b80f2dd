// Micro-benchmark of kernels::matmul (not wired into CMake). Build by hand, e.g.:
//   g++ -std=c++20 -O3 -Isrc bench/matmul_bench.cc build/libdi_kernels.a build/libdi_tensor.a \
//       build/libdi_base.a -lfmt -lopenblas -lpthread -o /tmp/matmul_bench
// Usage: matmul_bench [type n_out n_in n_rows threads [isa [inv] [int8]]]  (inv: batch_invariant,
//   int8: MatmulPrecision::kInt8 instead of the default kHigh)  (defaults: the report's table, both precisions)
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/kernels/cpu/matmul.h"
#include "deepinfer/tensor/quant.h"

using namespace deepinfer;

static DType parse_type(const std::string& s) {
  for (uint32_t id = 0; id < 40; ++id)
    if (auto t = dtype_from_ggml_id(id); t && dtype_name(*t) == s) return *t;
  std::fprintf(stderr, "unknown type %s\n", s.c_str());
  std::exit(2);
}

static void bench(DType t, int64_t n_out, int64_t n_in, int64_t n_rows, int threads, IsaLevel isa,
                  bool batch_invariant = false,
                  kernels::MatmulPrecision prec = kernels::MatmulPrecision::kHigh) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  const size_t rb = row_bytes(t, n_in);
  std::vector<uint8_t> w(rb * n_out);
  std::vector<float> row(n_in);
  for (int64_t o = 0; o < n_out; ++o) {
    for (auto& v : row) v = nd(rng);
    if (can_quantize(t)) (void)quantize_row(t, row.data(), w.data() + o * rb, n_in);
    else for (size_t i = 0; i < rb; ++i) w[o * rb + i] = static_cast<uint8_t>(rng() & 0x3f);  // small f16 scales
  }
  std::vector<float> x(n_rows * n_in), y(n_rows * n_out);
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(threads);
  kernels::MatmulParams p;
  p.weight = w.data(); p.weight_type = t; p.n_out = n_out; p.n_in = n_in; p.weight_row_bytes = rb;
  p.input = x.data(); p.n_rows = n_rows; p.input_stride = n_in; p.output = y.data(); p.output_stride = n_out;
  p.batch_invariant = batch_invariant;
  p.precision = prec;
  kernels::matmul_with_isa(p, pool, isa);  // warm-up
  const double flop = 2.0 * n_out * n_in * n_rows;
  int iters = std::max(3, static_cast<int>(2e9 / flop));
  iters = std::min(iters, 2000);
  // On a shared machine wall time is inflated by other processes; process CPU time per thread
  // (cpu / threads) is reported too, as the best estimate of an unloaded run.
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  };
  const double c0 = cpu_now();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) kernels::matmul_with_isa(p, pool, isa);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  const double c = (cpu_now() - c0) / iters / threads;
  std::printf("%-4s %-5s W=[%lldx%lld] rows=%-4lld thr=%d %-6s wall %9.1f us %7.1f GFLOP/s %6.1f GB/s | cpu/thr %9.1f us %7.1f GFLOP/s %6.1f GB/s\n",
              prec == kernels::MatmulPrecision::kHigh ? "high" : "int8", std::string(dtype_name(t)).c_str(), (long long)n_out, (long long)n_in, (long long)n_rows, threads,
              isa_name(isa), s * 1e6, flop / s * 1e-9, rb * n_out / s * 1e-9, c * 1e6, flop / c * 1e-9,
              rb * n_out / c * 1e-9);
}

int main(int argc, char** argv) {
  if (argc >= 6) {
    IsaLevel isa = best_isa();
    if (argc >= 7) isa = std::string(argv[6]) == "scalar" ? IsaLevel::kScalar
                         : std::string(argv[6]) == "avx2" ? IsaLevel::kAvx2 : IsaLevel::kAvx512;
    bool inv = false;
    auto prec = kernels::MatmulPrecision::kHigh;
    for (int i = 7; i < argc; ++i) {
      if (std::string(argv[i]) == "inv") inv = true;
      if (std::string(argv[i]) == "int8") prec = kernels::MatmulPrecision::kInt8;
    }
    bench(parse_type(argv[1]), std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]), std::atoi(argv[5]), isa,
          inv, prec);
    return 0;
  }
  for (int thr : {1, 2})
    for (int64_t rows : {1, 256}) {
      for (auto prec : {kernels::MatmulPrecision::kInt8, kernels::MatmulPrecision::kHigh}) {
        bench(DType::kQ4_1, 1536, 576, rows, thr, best_isa(), false, prec);
        bench(DType::kQ4_1, 576, 1536, rows, thr, best_isa(), false, prec);
        bench(DType::kQ8_0, 49152, 576, rows, thr, best_isa(), false, prec);
      }
    }
  return 0;
}
