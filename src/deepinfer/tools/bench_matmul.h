// `deepinfer bench --mode matmul`: one kernels::matmul call timed alone (weights quantized to
// the chosen type, random activations), the kernel-level view under prefill and decode numbers;
// also DeepSeek's FP8 (128x128 blocks) and FP4 (ue8m0 per 32) formats through their kernels.
#pragma once

#include <string>
#include <vector>

namespace deepinfer::tools {

struct MatmulBenchOptions {
  // "TYPE:OUTxIN" entries, e.g. "q4_1:1536x576" or "fp4:2048x4096"; empty = SmolLM2-135M's three
  // matmul shapes.
  std::vector<std::string> shapes;
  std::vector<int> rows;  // activation rows per call (1 = decode, 256 = a prefill chunk)
  int threads = 0;        // 0 = one per core
  bool batch_invariant = false;
};

// Prints one JSON line per (shape, rows, precision); returns the exit status.
int run_matmul_bench(const MatmulBenchOptions& opts);

}  // namespace deepinfer::tools
