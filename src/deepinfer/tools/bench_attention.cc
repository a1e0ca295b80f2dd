#include "deepinfer/tools/bench_attention.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "deepinfer/base/aligned_buffer.h"
#include "deepinfer/base/cpu_features.h"
#include "deepinfer/base/fp16.h"
#include "deepinfer/base/memory_info.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/base/timer.h"
#include "deepinfer/kernels/cpu/attention.h"
#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {
namespace {

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One layer's K and V pools holding `blocks` blocks of random rows in `type`.
struct LayerPools {
  AlignedBuffer<uint8_t> k, v;
};

// Random rows in [-1, 1) from a cheap generator (a pool of GBs filled by std::normal_distribution
// takes longer than the measurement).
void fill(AlignedBuffer<uint8_t>& buf, size_t elems, DType type, uint64_t seed) {
  const size_t esize = type == DType::kF32 ? 4 : 2;
  buf.resize(elems * esize);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < elems; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const float v = static_cast<float>(static_cast<int32_t>(x >> 32)) * (1.0f / 2147483648.0f);
    if (type == DType::kF32) reinterpret_cast<float*>(buf.data())[i] = v;
    else if (type == DType::kF16) reinterpret_cast<uint16_t*>(buf.data())[i] = f32_to_f16(v);
    else reinterpret_cast<uint16_t*>(buf.data())[i] = f32_to_bf16(v);
  }
}

void measure(const AttentionBenchOptions& o, DType type, int batch, int context, ThreadPool& pool) {
  std::mt19937 rng(1);
  const int64_t blocks_per_seq = (context + o.block_size - 1) / o.block_size;
  const int64_t blocks = blocks_per_seq * batch;
  const int64_t token_stride = int64_t{o.n_kv_heads} * o.head_dim;
  const int64_t block_stride = token_stride * o.block_size;
  const size_t esize = type == DType::kF32 ? 4 : 2;
  // Enough layers' caches that one pass over them is twice the last-level cache (at least
  // 256 MB where sysfs does not say), at most the model's layer count.
  const double layer_bytes = 2.0 * static_cast<double>(blocks * block_stride * esize);
  const double pass_bytes = std::max(256e6, 2.0 * static_cast<double>(largest_cache_bytes().value_or(0)));
  const int layers = std::clamp(static_cast<int>(pass_bytes / layer_bytes) + 1, 1, o.layers);
  std::vector<LayerPools> pools(static_cast<size_t>(layers));
  uint64_t seed = 1;
  for (auto& lp : pools) {
    fill(lp.k, static_cast<size_t>(blocks * block_stride), type, seed++);
    fill(lp.v, static_cast<size_t>(blocks * block_stride), type, seed++);
  }
  // A running server's block tables: each sequence's blocks scattered over the pool.
  std::vector<int32_t> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<kernels::AttentionSeq> seqs(static_cast<size_t>(batch));
  for (int s = 0; s < batch; ++s)
    seqs[s] = {s, 1, context - 1, context, order.data() + s * blocks_per_seq};
  const int64_t q_row = int64_t{o.n_heads} * o.head_dim;
  std::vector<float> q(static_cast<size_t>(batch * q_row)), out(q.size());
  std::normal_distribution<float> normal;
  for (float& x : q) x = normal(rng);
  kernels::AttentionParams p{};
  p.q = q.data();
  p.q_stride = q_row;
  p.kv_type = type;
  p.block_stride = block_stride;
  p.token_stride = token_stride;
  p.block_size = o.block_size;
  p.n_heads = o.n_heads;
  p.n_kv_heads = o.n_kv_heads;
  p.head_dim = o.head_dim;
  p.v_head_dim = o.head_dim;
  p.sliding_window = 0;
  p.scale = 1.0f / std::sqrt(static_cast<float>(o.head_dim));
  p.out = out.data();
  p.out_stride = q_row;
  p.seqs = seqs.data();
  p.n_seqs = batch;
  auto pass = [&] {
    for (auto& lp : pools) {
      p.k_cache = lp.k.data();
      p.v_cache = lp.v.data();
      kernels::attention(p, pool);
    }
  };
  pass();  // warm-up (page faults)
  const double kv_bytes_per_pass = layer_bytes * layers;
  const int passes = std::clamp(static_cast<int>(2e9 / kv_bytes_per_pass), 2, 200);
  const double c0 = process_cpu_seconds(), t0 = now_seconds();
  for (int i = 0; i < passes; ++i) pass();
  const double wall = (now_seconds() - t0) / passes / layers;
  const double cpu = (process_cpu_seconds() - c0) / passes / layers / pool.num_threads();
  nlohmann::json j = {{"mode", "attention"},
                      {"kv_cache_dtype", std::string(dtype_name(type))},
                      {"batch", batch},
                      {"context", context},
                      {"heads", o.n_heads},
                      {"kv_heads", o.n_kv_heads},
                      {"head_dim", o.head_dim},
                      {"layers_cycled", layers},
                      {"cycled_mb", kv_bytes_per_pass / 1e6},
                      {"threads", pool.num_threads()},
                      {"isa", isa_name(best_isa())},
                      {"us_per_layer", wall * 1e6},
                      {"kv_gb_per_s", layer_bytes / wall * 1e-9},
                      {"cpu_us_per_layer_per_thread", cpu * 1e6},
                      {"step_ms_for_layers", wall * 1e3 * o.layers}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int run_attention_bench(const AttentionBenchOptions& o) {
  DType type = DType::kF32;
  if (o.kv_dtype == "f16") type = DType::kF16;
  else if (o.kv_dtype == "bf16") type = DType::kBF16;
  else if (o.kv_dtype != "f32" && o.kv_dtype != "auto")
    return report_error(invalid_argument("--kv-cache-dtype '{}': attention takes auto, f32, f16 or bf16", o.kv_dtype));
  // One layer's K and V pools per point must fit: refuse a point the machine cannot hold.
  const double token_bytes = 2.0 * o.n_kv_heads * o.head_dim * (type == DType::kF32 ? 4 : 2);
  const auto avail = available_memory_bytes();
  for (int context : o.contexts)
    for (int batch : o.batches)
      if (const double need = token_bytes * batch * (context + o.block_size); avail && need > double(*avail))
        return report_error(resource_exhausted(
            "bench --mode attention: {} sequences of {} keys need {:.1f} GiB of KV, more than the "
            "{:.1f} GiB available",
            batch, context, need / double(1 << 30), double(*avail) / double(1 << 30)));
  ThreadPool pool(std::max(0, o.threads));
  for (int context : o.contexts)
    for (int batch : o.batches) measure(o, type, batch, context, pool);
  return kExitOk;
}

}  // namespace deepinfer::tools
