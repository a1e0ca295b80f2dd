// `deepinfer bench --mode attention`: decode attention alone (one kernels::attention call per
// layer, one query token per sequence), the kernel-level view under the decode-over-long-context
// numbers: every sequence's KV blocks shuffled in the pool as a running server leaves them, and
// as many layers' caches cycled as it takes to keep the KV out of the CPU caches.
#pragma once

#include <string>
#include <vector>

namespace deepinfer::tools {

struct AttentionBenchOptions {
  std::vector<int> batches;       // sequences per call
  std::vector<int> contexts;      // keys per sequence
  std::string kv_dtype = "f32";   // f32, f16 or bf16 ("auto" = f32)
  int threads = 0;                // 0 = one per core
  // Default: SmolLM2-135M (9 query heads, 3 KV heads, 64 dims, 30 layers, blocks of 16).
  int n_heads = 9, n_kv_heads = 3, head_dim = 64, layers = 30, block_size = 16;
};

// Prints one JSON line per (batch, context); returns the exit status.
int run_attention_bench(const AttentionBenchOptions& opts);

}  // namespace deepinfer::tools
