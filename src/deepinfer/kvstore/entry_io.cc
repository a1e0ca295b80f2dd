// Reading an entry's shard files and publishing rewritten shards (see entry_io.h).
#include "deepinfer/kvstore/entry_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include "deepinfer/kvstore/layout.h"

namespace deepinfer::kvstore {

EntryShardReads read_entry_shards(IoEngine& io, const std::vector<std::string>& targets,
                                  const BlockKey& key, ShardImages& images) {
  const int n = images.count();
  const int num_targets = static_cast<int>(targets.size());
  std::vector<IoRequest> reqs(n);
  for (int i = 0; i < n; ++i) {
    const int t = placement(key, i, num_targets);
    reqs[i].path = shard_path(targets[t], key, i);
    reqs[i].buf = images.file(i);
    reqs[i].len = images.file_bytes();
    reqs[i].domain = t;
  }
  io.read_files(reqs);
  EntryShardReads r;
  r.present.resize(n);
  r.lens.resize(n);
  r.mtimes.resize(n);
  for (int i = 0; i < n; ++i) {
    r.present[i] = reqs[i].error == 0 && reqs[i].done >= kShardHeaderBytes;
    r.lens[i] = reqs[i].done;
    r.mtimes[i] = reqs[i].mtime_unix;
    r.missing += !r.present[i];
  }
  return r;
}

int rewrite_entry_shards(IoEngine& io, const std::vector<std::string>& targets, const BlockKey& key,
                         const ErasureCode& code, const DecodeOutcome& decoded, const uint8_t* block,
                         const std::vector<int>& which, bool sync) {
  const int num_targets = static_cast<int>(targets.size());
  ShardImages fresh(code.data_shards() + code.parity_shards(), decoded.header.shard_bytes);
  encode_entry(code, decoded.header, block, fresh);
  std::vector<IoRequest> writes;
  for (int i : which) {
    const int t = placement(key, i, num_targets);
    const std::string root = targets[t] + "/" + kLayoutDir;
    ::mkdir(root.c_str(), 0755);  // a replaced (empty) target; fails harmlessly if it exists or is gone
    ::mkdir(subdir_path(targets[t], key).c_str(), 0755);
    IoRequest w;
    w.path = temp_shard_path(targets[t], key, i);
    w.buf = fresh.file(i);
    w.len = fresh.file_bytes();
    w.domain = t;
    w.mtime_unix = decoded.max_mtime;
    writes.push_back(std::move(w));
  }
  if (writes.empty()) return 0;
  io.write_files(writes, sync);
  int fixed = 0;
  for (size_t w = 0; w < writes.size(); ++w) {
    if (writes[w].error != 0) continue;
    const int t = placement(key, which[w], num_targets);
    if (::rename(writes[w].path.c_str(), shard_path(targets[t], key, which[w]).c_str()) == 0) {
      ++fixed;
    } else {
      ::unlink(writes[w].path.c_str());
    }
  }
  return fixed;
}

}  // namespace deepinfer::kvstore
