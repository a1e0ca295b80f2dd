// Whole-file batched reads and writes for shard files: io_uring when the kernel permits it,
// pread/pwrite otherwise; O_DIRECT where the file system supports it (not tmpfs), buffered
// otherwise. Both choices are made at run time. One IoEngine per thread (not thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace deepinfer::kvstore {

struct IoRequest {
  std::string path;
  uint8_t* buf = nullptr;  // aligned to kIoAlign
  size_t len = 0;          // multiple of kIoAlign
  int domain = 0;          // target index; O_DIRECT support is remembered per domain
  // Results.
  int error = 0;           // errno of the failing step, 0 on success
  size_t done = 0;         // bytes transferred
  size_t file_size = 0;    // reads: st_size
  int64_t mtime_unix = 0;  // writes: mtime to set; reads: st_mtime (the entry's expiry time)
};

enum class IoMode { kAuto, kUring, kPread };

class IoEngine {
 public:
  IoEngine(IoMode mode, bool direct_io, int num_domains);
  ~IoEngine();
  IoEngine(const IoEngine&) = delete;
  IoEngine& operator=(const IoEngine&) = delete;

  bool using_uring() const { return ring_ != nullptr; }
  // True once a file in `domain` was opened with O_DIRECT.
  bool direct_in_use(int domain) const;

  // Reads each file from offset 0, up to len bytes.
  void read_files(std::span<IoRequest> reqs);
  // Creates each file (must not exist), writes len bytes, sets its mtime to the request's
  // mtime_unix and (if sync) fdatasyncs it. On failure the file is removed.
  void write_files(std::span<IoRequest> reqs, bool sync);

 private:
  int open_file(IoRequest& r, bool write);
  // Runs pread/pwrite (or their io_uring forms) for reqs whose fds[i] >= 0.
  void transfer(std::span<IoRequest> reqs, const std::vector<int>& fds, bool write);
  void transfer_sync(IoRequest& r, int fd, bool write);

  void* ring_ = nullptr;              // struct io_uring*, null when io_uring is unavailable
  bool direct_io_;
  std::vector<int8_t> direct_state_;  // per domain: -1 unknown, 0 unsupported, 1 works
};

}  // namespace deepinfer::kvstore
