// `deepinfer bench --mode kv-transfer`: GB/s of the KV transfer transport (transfer/) from this
// process to a receiver in a forked one, next to `ucx_perftest -t tag_bw` on 127.0.0.1.
#pragma once

#include <cstddef>
#include <vector>

namespace deepinfer::tools {

struct KvTransferBenchOptions {
  std::vector<size_t> message_bytes = {4 << 20};  // one measurement per size
  int messages = 0;  // per size; 0 = about 256 MiB worth (16 to 4096 messages)
  int repeat = 1;    // measurements (lines) per size
};

// Prints one JSON line per measurement; returns the exit status.
int run_kv_transfer_bench(const KvTransferBenchOptions& opts);

}  // namespace deepinfer::tools
