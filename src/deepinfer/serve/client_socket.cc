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
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return c;
  const int own = dirfd(dir);
  // The connection stays open (and its descriptor ours) until the handler's thread is done
  // with it, and no two open sockets share both address pairs, so the match is exact.
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    if (is_connection_of(int(fd), req)) {
      c.fd_ = int(fd);
      break;
    }
  }
  closedir(dir);
  return c;
}

bool ClientSocket::gone() const {
  if (fd_ < 0) return false;
  pollfd p = {fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace deepinfer::serve
