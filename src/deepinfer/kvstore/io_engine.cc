// io_uring / pread implementation of IoEngine.
#include "deepinfer/kvstore/io_engine.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace deepinfer::kvstore {
namespace {
constexpr unsigned kRingDepth = 64;
}

IoEngine::IoEngine(IoMode mode, bool direct_io, int num_domains)
    : direct_io_(direct_io), direct_state_(std::max(num_domains, 1), -1) {
  if (mode == IoMode::kPread) return;
  auto* ring = new io_uring;
  // Containers and hardened kernels often refuse io_uring (EPERM/ENOSYS): fall back quietly.
  if (io_uring_queue_init(kRingDepth, ring, 0) == 0) {
    ring_ = ring;
  } else {
    delete ring;
  }
}

IoEngine::~IoEngine() {
  if (ring_) {
    auto* ring = static_cast<io_uring*>(ring_);
    io_uring_queue_exit(ring);
    delete ring;
  }
}

bool IoEngine::direct_in_use(int domain) const {
  return domain >= 0 && domain < static_cast<int>(direct_state_.size()) &&
         direct_state_[domain] == 1;
}

int IoEngine::open_file(IoRequest& r, bool write) {
  const int base = write ? (O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC) : (O_RDONLY | O_CLOEXEC);
  int8_t& state = direct_state_[std::clamp(r.domain, 0, int(direct_state_.size()) - 1)];
  if (direct_io_ && state != 0) {
    int fd = ::open(r.path.c_str(), base | O_DIRECT, 0644);
    if (fd >= 0) {
      state = 1;
      return fd;
    }
    if (errno != EINVAL) {
      r.error = errno;
      return -1;
    }
    state = 0;  // e.g. tmpfs: remember and use buffered I/O on this target
    if (write) ::unlink(r.path.c_str());  // some kernels create the file before refusing
  }
  int fd = ::open(r.path.c_str(), base, 0644);
  if (fd < 0) r.error = errno;
  return fd;
}

void IoEngine::transfer_sync(IoRequest& r, int fd, bool write) {
  while (r.done < r.len) {
    ssize_t n = write ? ::pwrite(fd, r.buf + r.done, r.len - r.done, r.done)
                      : ::pread(fd, r.buf + r.done, r.len - r.done, r.done);
    if (n < 0) {
      if (errno == EINTR) continue;
      r.error = errno;
      return;
    }
    if (n == 0) return;  // end of file
    r.done += static_cast<size_t>(n);
  }
}

void IoEngine::transfer(std::span<IoRequest> reqs, const std::vector<int>& fds, bool write) {
  if (!ring_) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (fds[i] >= 0) transfer_sync(reqs[i], fds[i], write);
    }
    return;
  }
  auto* ring = static_cast<io_uring*>(ring_);
  size_t next = 0, inflight = 0;
  while (next < reqs.size() || inflight > 0) {
    while (next < reqs.size() && inflight < kRingDepth) {
      if (fds[next] < 0) {
        ++next;
        continue;
      }
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (!sqe) break;
      IoRequest& r = reqs[next];
      if (write) {
        io_uring_prep_write(sqe, fds[next], r.buf, static_cast<unsigned>(r.len), 0);
      } else {
        io_uring_prep_read(sqe, fds[next], r.buf, static_cast<unsigned>(r.len), 0);
      }
      io_uring_sqe_set_data64(sqe, next);
      ++next;
      ++inflight;
    }
    if (inflight == 0) break;
    int rc = io_uring_submit_and_wait(ring, 1);
    if (rc < 0 && rc != -EINTR) {
      // The ring broke (should not happen): finish everything synchronously.
      io_uring_queue_exit(ring);
      delete ring;
      ring_ = nullptr;
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (fds[i] >= 0 && reqs[i].done == 0 && reqs[i].error == 0) transfer_sync(reqs[i], fds[i], write);
      }
      return;
    }
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
      IoRequest& r = reqs[io_uring_cqe_get_data64(cqe)];
      if (cqe->res < 0) {
        r.error = -cqe->res;
      } else {
        r.done = static_cast<size_t>(cqe->res);
      }
      ++seen;
    }
    io_uring_cq_advance(ring, seen);
    inflight -= seen;
  }
  // Short transfers (buffered I/O may stop early): finish them with plain calls.
  for (size_t i = 0; i < reqs.size(); ++i) {
    IoRequest& r = reqs[i];
    if (fds[i] >= 0 && r.error == 0 && r.done < r.len && (write || r.done < r.file_size)) {
      transfer_sync(r, fds[i], write);
    }
  }
}

void IoEngine::read_files(std::span<IoRequest> reqs) {
  std::vector<int> fds(reqs.size(), -1);
  for (size_t i = 0; i < reqs.size(); ++i) {
    IoRequest& r = reqs[i];
    r.error = 0;
    r.done = 0;
    fds[i] = open_file(r, false);
    if (fds[i] < 0) continue;
    struct stat st;
    if (::fstat(fds[i], &st) != 0) {
      r.error = errno;
      ::close(fds[i]);
      fds[i] = -1;
      continue;
    }
    r.file_size = static_cast<size_t>(st.st_size);
    r.mtime_unix = st.st_mtim.tv_sec;
  }
  transfer(reqs, fds, false);
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
}

void IoEngine::write_files(std::span<IoRequest> reqs, bool sync) {
  std::vector<int> fds(reqs.size(), -1);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].error = 0;
    reqs[i].done = 0;
    fds[i] = open_file(reqs[i], true);
  }
  transfer(reqs, fds, true);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (fds[i] < 0) continue;
    IoRequest& r = reqs[i];
    const timespec times[2] = {{r.mtime_unix, 0}, {r.mtime_unix, 0}};
    if (r.error == 0 && r.done != r.len) r.error = EIO;
    if (r.error == 0 && ::futimens(fds[i], times) != 0) r.error = errno;
    if (r.error == 0 && sync && ::fdatasync(fds[i]) != 0) r.error = errno;
    ::close(fds[i]);
    if (r.error != 0) ::unlink(r.path.c_str());
  }
}

}  // namespace deepinfer::kvstore
