#include "deepinfer/tools/bench_matmul.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "deepinfer/base/cpu_features.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/base/timer.h"
#include "deepinfer/kernels/cpu/fp4_matmul.h"
#include "deepinfer/kernels/cpu/fp8_matmul.h"
#include "deepinfer/kernels/cpu/matmul.h"
#include "deepinfer/tensor/quant.h"
#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {
namespace {

// Block-scaled DeepSeek weight formats, which have their own kernels (not kernels::matmul):
// FP8 e4m3 with an f32 scale per 128x128 block, FP4 e2m1 with a ue8m0 scale per 32 inputs.
enum class Scaled { kNone, kFp8, kFp4 };

struct Shape {
  DType type;
  int64_t n_out;
  int64_t n_in;
  Scaled scaled = Scaled::kNone;
};

Result<Shape> parse_shape(const std::string& s) {
  const size_t colon = s.find(':');
  const size_t x = s.find('x', colon == std::string::npos ? 0 : colon);
  if (colon == std::string::npos || x == std::string::npos)
    return invalid_argument("--matmul-shape '{}': expected TYPE:OUTxIN, e.g. q4_1:1536x576", s);
  const std::string type_name = s.substr(0, colon);
  if (type_name == "fp8" || type_name == "fp4") {
    char* end = nullptr;
    const long long n_out = std::strtoll(s.c_str() + colon + 1, &end, 10);
    const long long n_in = std::strtoll(s.c_str() + x + 1, nullptr, 10);
    if (end != s.c_str() + x || n_out < 1 || n_in < 1 || n_out > (1 << 20) || n_in > (1 << 20) ||
        n_in % 2 != 0)
      return invalid_argument("--matmul-shape '{}': OUT and IN must be in [1, 1048576] (IN even)",
                              s);
    return Shape{DType::kF32, n_out, n_in, type_name == "fp8" ? Scaled::kFp8 : Scaled::kFp4};
  }
  std::optional<DType> type;
  for (uint32_t id = 0; id < 64 && !type; ++id)
    if (auto t = dtype_from_ggml_id(id); t && dtype_name(*t) == type_name) type = t;
  if (!type) return invalid_argument("--matmul-shape '{}': unknown weight type '{}'", s, type_name);
  if (!kernels::matmul_supports(*type) || !can_quantize(*type))
    return invalid_argument(
        "--matmul-shape '{}': weight type '{}' cannot be benchmarked (it needs a matmul "
        "kernel and a quantizer to make the weights: f32, f16, bf16, q4_0, q4_1, q5_0, "
        "q5_1, q8_0, fp8, fp4)",
        s, type_name);
  char* end = nullptr;
  const long long n_out = std::strtoll(s.c_str() + colon + 1, &end, 10);
  const long long n_in = std::strtoll(s.c_str() + x + 1, nullptr, 10);
  if (end != s.c_str() + x || n_out < 1 || n_in < 1 || n_out > (1 << 20) || n_in > (1 << 20))
    return invalid_argument("--matmul-shape '{}': OUT and IN must be in [1, 1048576]", s);
  const int64_t block = dtype_info(*type)->block_elems;
  if (n_in % block != 0)
    return invalid_argument("--matmul-shape '{}': IN must be a multiple of {}'s block of {}", s, type_name, block);
  return Shape{*type, n_out, n_in};
}

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void measure(const Shape& shape, int64_t rows, ThreadPool& pool, bool batch_invariant,
             kernels::MatmulPrecision precision) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  const size_t rb = row_bytes(shape.type, shape.n_in);
  std::vector<uint8_t> weight(rb * static_cast<size_t>(shape.n_out));
  std::vector<float> row(static_cast<size_t>(shape.n_in));
  for (int64_t o = 0; o < shape.n_out; ++o) {
    for (float& v : row) v = normal(rng);
    (void)quantize_row(shape.type, row.data(), weight.data() + static_cast<size_t>(o) * rb, shape.n_in);
  }
  std::vector<float> x(static_cast<size_t>(rows * shape.n_in)), y(static_cast<size_t>(rows * shape.n_out));
  for (float& v : x) v = normal(rng);
  kernels::MatmulParams p;
  p.weight = weight.data();
  p.weight_type = shape.type;
  p.n_out = shape.n_out;
  p.n_in = shape.n_in;
  p.weight_row_bytes = rb;
  p.input = x.data();
  p.n_rows = rows;
  p.input_stride = shape.n_in;
  p.output = y.data();
  p.output_stride = shape.n_out;
  p.batch_invariant = batch_invariant;
  p.precision = precision;
  kernels::matmul(p, pool);  // warm-up
  const double flop = 2.0 * static_cast<double>(shape.n_out * shape.n_in * rows);
  const int iters = std::clamp(static_cast<int>(2e9 / flop), 3, 2000);
  const double c0 = process_cpu_seconds();
  const double t0 = now_seconds();
  for (int i = 0; i < iters; ++i) kernels::matmul(p, pool);
  const double wall = (now_seconds() - t0) / iters;
  // On a shared machine wall time is inflated by other processes; CPU time per thread is the
  // better estimate of an unloaded run, so both are reported.
  const double cpu = (process_cpu_seconds() - c0) / iters / pool.num_threads();
  const double weight_bytes = static_cast<double>(rb) * static_cast<double>(shape.n_out);
  nlohmann::json j = {{"mode", "matmul"},
                      {"weight_type", std::string(dtype_name(shape.type))},
                      {"n_out", shape.n_out},
                      {"n_in", shape.n_in},
                      {"rows", rows},
                      {"threads", pool.num_threads()},
                      {"isa", isa_name(best_isa())},
                      {"precision", precision == kernels::MatmulPrecision::kHigh ? "high" : "int8"},
                      {"batch_invariant", batch_invariant},
                      {"us", wall * 1e6},
                      {"gflop_per_s", flop / wall * 1e-9},
                      {"weight_gb_per_s", weight_bytes / wall * 1e-9},
                      {"cpu_us_per_thread", cpu * 1e6},
                      {"cpu_gflop_per_s", flop / cpu * 1e-9}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

// Times `call` like measure() and prints the same JSON line.
template <typename F>
void time_and_print(const std::string& type, const Shape& shape, int64_t rows, ThreadPool& pool,
                    double weight_bytes, F call) {
  call();  // warm-up
  const double flop = 2.0 * static_cast<double>(shape.n_out * shape.n_in * rows);
  const int iters = std::clamp(static_cast<int>(2e9 / flop), 3, 2000);
  const double c0 = process_cpu_seconds();
  const double t0 = now_seconds();
  for (int i = 0; i < iters; ++i) call();
  const double wall = (now_seconds() - t0) / iters;
  const double cpu = (process_cpu_seconds() - c0) / iters / pool.num_threads();
  nlohmann::json j = {{"mode", "matmul"},
                      {"weight_type", type},
                      {"n_out", shape.n_out},
                      {"n_in", shape.n_in},
                      {"rows", rows},
                      {"threads", pool.num_threads()},
                      {"isa", isa_name(best_isa())},
                      {"precision", "high"},
                      {"us", wall * 1e6},
                      {"gflop_per_s", flop / wall * 1e-9},
                      {"weight_gb_per_s", weight_bytes / wall * 1e-9},
                      {"cpu_us_per_thread", cpu * 1e6},
                      {"cpu_gflop_per_s", flop / cpu * 1e-9}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

// FP8 (f32 scale per 128x128 block) or FP4 (ue8m0 byte per 32 inputs) weights of random bytes
// with scales near 1, f32 activations; weight_gb_per_s counts the weight and scale bytes.
void measure_scaled(const Shape& shape, int64_t rows, ThreadPool& pool) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> byte(0, 255), exponent(120, 130);
  std::vector<float> x(static_cast<size_t>(rows * shape.n_in)),
      y(static_cast<size_t>(rows * shape.n_out));
  for (float& v : x) v = normal(rng);
  const bool fp8 = shape.scaled == Scaled::kFp8;
  const int64_t row = fp8 ? shape.n_in : shape.n_in / 2;
  std::vector<uint8_t> w(static_cast<size_t>(row * shape.n_out));
  for (auto& v : w) v = static_cast<uint8_t>(fp8 && (byte(rng) & 0x7f) == 0x7f ? 0 : byte(rng));
  if (fp8) {
    const int64_t bi = (shape.n_in + 127) / 128, bo = (shape.n_out + 127) / 128;
    std::vector<float> scale(static_cast<size_t>(bo * bi));
    for (float& v : scale) v = std::ldexp(1.0f, exponent(rng) - 127);
    kernels::Fp8MatmulParams p;
    p.weight = w.data();
    p.weight_row_bytes = row;
    p.scale_inv = scale.data();
    p.scale_stride = bi;
    p.n_out = shape.n_out;
    p.n_in = shape.n_in;
    p.input = x.data();
    p.n_rows = rows;
    p.input_stride = shape.n_in;
    p.output = y.data();
    p.output_stride = shape.n_out;
    time_and_print("fp8_e4m3_b128", shape, rows, pool, double(w.size()) + 4.0 * scale.size(),
                   [&] { kernels::fp8_matmul(p, pool); });
    return;
  }
  const int64_t nb = (shape.n_in + kernels::kFp4Block - 1) / kernels::kFp4Block;
  std::vector<uint8_t> scale(static_cast<size_t>(nb * shape.n_out));
  for (auto& v : scale) v = static_cast<uint8_t>(exponent(rng));
  kernels::Fp4MatmulParams p;
  p.weight = w.data();
  p.weight_row_bytes = row;
  p.scale = scale.data();
  p.scale_stride = nb;
  p.n_out = shape.n_out;
  p.n_in = shape.n_in;
  p.input = x.data();
  p.n_rows = rows;
  p.input_stride = shape.n_in;
  p.output = y.data();
  p.output_stride = shape.n_out;
  time_and_print("fp4_e2m1_ue8m0", shape, rows, pool, double(w.size() + scale.size()),
                 [&] { kernels::fp4_matmul(p, pool); });
}

}  // namespace

int run_matmul_bench(const MatmulBenchOptions& opts) {
  std::vector<Shape> shapes;
  if (opts.shapes.empty()) {
    shapes = {{DType::kQ4_1, 1536, 576}, {DType::kQ4_1, 576, 1536}, {DType::kQ8_0, 49152, 576}};
  }
  for (const std::string& s : opts.shapes) {
    auto shape = parse_shape(s);
    if (!shape.is_ok()) return report_error(shape.status());
    shapes.push_back(*shape);
  }
  const int threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::thread::hardware_concurrency());
  ThreadPool pool(std::max(1, threads));
  for (const Shape& shape : shapes) {
    for (int rows : opts.rows) {
      if (shape.scaled != Scaled::kNone) {
        measure_scaled(shape, rows, pool);
        continue;
      }
      for (auto precision : {kernels::MatmulPrecision::kHigh, kernels::MatmulPrecision::kInt8})
        measure(shape, rows, pool, opts.batch_invariant, precision);
    }
  }
  return kExitOk;
}

}  // namespace deepinfer::tools
