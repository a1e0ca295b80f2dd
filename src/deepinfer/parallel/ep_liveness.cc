#include "deepinfer/parallel/ep_liveness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>

#include "deepinfer/parallel/ep_group.h"

namespace deepinfer::parallel {
namespace {

constexpr int kConnectTimeoutMs = 3000;
constexpr int kAcceptTimeoutMs = 60000;
constexpr char kAbortByte = 'X';

struct Hello {
  uint64_t token;
  int32_t rank;
};

// Rank 0's IPv4 addresses, loopback last (a remote rank reaches one of the others).
std::vector<std::string> local_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
      if (std::string(text) != "127.0.0.1") out.push_back(text);
    }
    freeifaddrs(list);
  }
  out.push_back("127.0.0.1");
  return out;
}

void keepalive(int fd) {  // a host that vanishes without closing is noticed in ~20 s
  int on = 1, idle = 10, interval = 2, count = 5;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

// A connected socket to addr:port within the timeout, or -1.
int connect_to(const std::string& addr, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(port));
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof(err);
  if (poll(&p, 1, kConnectTimeoutMs) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

Result<std::unique_ptr<EpLiveness>> EpLiveness::connect(EpGroup& group, LostFn lost) {
  std::unique_ptr<EpLiveness> l(new EpLiveness(group.rank(), group.size()));
  l->lost_ = std::move(lost);
  std::string offer, problem;
  int listen_fd = -1;
  if (l->rank_ == 0) {
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    socklen_t len = sizeof(sa);
    if (listen_fd < 0 || bind(listen_fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        listen(listen_fd, 1024) != 0 || getsockname(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
      problem = "rank 0 cannot listen on a TCP port for the ranks' liveness connections";
    const uint64_t token = std::random_device{}() * 0x9e3779b97f4a7c15ull ^ uint64_t(getpid());
    offer = std::to_string(ntohs(sa.sin_port)) + " " + std::to_string(token);
    for (const std::string& a : local_addresses()) offer += " " + a;
  }
  offer = group.broadcast(offer, false);
  std::istringstream in(offer);
  int port = 0;
  uint64_t token = 0;
  in >> port >> token;
  if (l->rank_ == 0) {
    l->fds_.assign(size_t(l->size_), -1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kAcceptTimeoutMs);
    for (int joined = 1; problem.empty() && joined < l->size_;) {
      const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                               deadline - std::chrono::steady_clock::now()).count());
      pollfd p{listen_fd, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, left) != 1) {
        problem = "not every rank reached rank 0's liveness port in 60 s (a firewall between hosts?)";
        break;
      }
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      Hello h{};
      if (fd < 0) continue;
      timeval patience{5, 0};  // a stranger that connects and says nothing cannot hold us up
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
      if (recv(fd, &h, sizeof(h), MSG_WAITALL) != ssize_t(sizeof(h)) || h.token != token || h.rank <= 0 ||
          h.rank >= l->size_ || l->fds_[size_t(h.rank)] >= 0) {
        close(fd);  // a stranger on the port, not one of ours
        continue;
      }
      keepalive(fd);
      timeval forever{0, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof(forever));
      l->fds_[size_t(h.rank)] = fd;
      ++joined;
    }
    if (listen_fd >= 0) close(listen_fd);
  } else {
    int fd = -1;
    for (std::string addr; fd < 0 && in >> addr;) fd = connect_to(addr, port);
    const Hello h{token, l->rank_};
    if (fd < 0 || send(fd, &h, sizeof(h), MSG_NOSIGNAL) != ssize_t(sizeof(h))) {
      problem = "rank " + std::to_string(l->rank_) + " cannot reach rank 0's liveness port (" + offer + ")";
      if (fd >= 0) close(fd), fd = -1;
    } else {
      keepalive(fd);
    }
    l->fds_ = {fd};
  }
  if (!group.all(problem.empty()))
    return io_error("expert parallel: {}", problem.empty() ? "another rank could not set up its liveness connection"
                                                           : problem);
  if (pipe2(l->wake_, O_CLOEXEC) != 0) return io_error("expert parallel: cannot create a pipe");
  EpLiveness* self = l.get();
  l->thread_ = std::thread([self] { self->rank_ == 0 ? self->monitor_root() : self->monitor_secondary(); });
  return l;
}

EpLiveness::~EpLiveness() {
  stopping_ = true;
  if (wake_[1] >= 0) {
    const char b = 0;
    [[maybe_unused]] ssize_t n = write(wake_[1], &b, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : fds_)
    if (fd >= 0) close(fd);
  for (int fd : wake_)
    if (fd >= 0) close(fd);
}

void EpLiveness::abort_others() {
  for (int fd : fds_)
    if (fd >= 0) [[maybe_unused]] ssize_t n = send(fd, &kAbortByte, 1, MSG_NOSIGNAL);
}

void EpLiveness::monitor_root() {
  bool reported = false;
  for (;;) {
    std::vector<pollfd> ps{{wake_[0], POLLIN, 0}};
    std::vector<int> ranks{-1};
    for (int r = 1; r < size_; ++r)
      if (fds_[size_t(r)] >= 0) ps.push_back({fds_[size_t(r)], POLLIN, 0}), ranks.push_back(r);
    if (poll(ps.data(), ps.size(), -1) < 0) continue;
    if (ps[0].revents) return;
    for (size_t i = 1; i < ps.size(); ++i) {
      if (!ps[i].revents) continue;
      char b;
      if (recv(ps[i].fd, &b, 1, 0) > 0) continue;  // nothing is sent this way; ignore
      const int r = ranks[i];
      close(fds_[size_t(r)]);
      fds_[size_t(r)] = -1;
      if (stopping_ || reported) continue;
      reported = true;
      if (lost_) lost_(r, "exited or was killed (its connection to rank 0 closed)");
    }
  }
}

void EpLiveness::monitor_secondary() {
  pollfd ps[2] = {{wake_[0], POLLIN, 0}, {fds_[0], POLLIN, 0}};
  while (poll(ps, 2, -1) < 0) {
  }
  if (ps[0].revents) return;
  char b = 0;
  const ssize_t n = recv(fds_[0], &b, 1, 0);
  if (stopping_ && n <= 0) return;
  std::fprintf(stderr, "deepinfer: expert-parallel rank %d exits: %s\n", rank_,
               n > 0 ? "rank 0 reported a lost rank" : "rank 0 is gone");
  std::fflush(stderr);
  _exit(1);
}

}  // namespace deepinfer::parallel
