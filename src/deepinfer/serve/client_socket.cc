#include "deepinfer/serve/client_socket.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include <httplib.h>

namespace deepinfer::serve {
namespace {

// "host", port of an address the way cpp-httplib writes Request::remote_addr (getnameinfo,
// numeric host).
bool numeric_address(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char name[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, name, sizeof name, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  host = name;
  port = std::atoi(serv);
  return true;
}

// The local port of a connected socket; false for anything else (a listening socket too).
bool connected_local_port(int fd, int& port) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr;
  socklen_t len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  len = sizeof addr;
  std::string host;
  return getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
         numeric_address(addr, len, host, port);
}

// Calls fn(fd) for each descriptor this process has open (the directory's own left out).
template <typename Fn>
void for_each_fd(Fn fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  const int own = dirfd(dir);
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    if (!fn(int(fd))) break;
  }
  closedir(dir);
}

bool is_connection_of(int fd, const httplib::Request& req) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr;
  socklen_t len = sizeof addr;
  std::string host;
  int port = -1;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  if (!numeric_address(addr, len, host, port) || port != req.remote_port || host != req.remote_addr) return false;
  len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  return numeric_address(addr, len, host, port) && port == req.local_port && host == req.local_addr;
}

}  // namespace

ClientSocket ClientSocket::of(const httplib::Request& req) {
  ClientSocket c;
  if (req.remote_port < 0 || req.local_port < 0) return c;
  // The connection stays open (and its descriptor ours) until the handler's thread is done
  // with it, and no two open sockets share both address pairs, so the match is exact.
  for_each_fd([&](int fd) {
    if (!is_connection_of(fd, req)) return true;
    c.fd_ = fd;
    return false;
  });
  return c;
}

bool ClientSocket::gone() const {
  if (fd_ < 0) return false;
  pollfd p = {fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

int shutdown_connections(int port) {
  int n = 0;
  // The listening socket has no peer, and this process's own outgoing connections have
  // ephemeral local ports (never a port something listens on), so only accepted ones match.
  for_each_fd([&](int fd) {
    int local_port = -1;
    if (connected_local_port(fd, local_port) && local_port == port && ::shutdown(fd, SHUT_RDWR) == 0)
      n += 1;
    return true;
  });
  return n;
}

}  // namespace deepinfer::serve
