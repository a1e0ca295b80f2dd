// `deepinfer bench --mode kvstore-io`: the KV store's own put/get throughput (erasure coding,
// checksums, io_uring batches) next to raw direct I/O of the same files, no engine involved.
#pragma once

#include <string>
#include <vector>

namespace deepinfer::tools {

struct KvStoreIoBenchOptions {
  // Where the 12 targets (10 data + 2 parity shards) go: empty = a temporary directory under
  // $TMPDIR or /tmp; one directory = 12 subdirectories of a fresh directory inside it; 12 = as given.
  std::vector<std::string> dirs;
  size_t block_kib = 1024;  // bytes of KV per block (one model block of all layers)
  size_t total_mib = 256;   // data written, then read (at least 32 blocks)
};

// Prints one JSON line; returns the exit status.
int run_kvstore_io_bench(const KvStoreIoBenchOptions& opts);

}  // namespace deepinfer::tools
