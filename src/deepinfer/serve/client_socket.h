// The socket a request arrived on, so a handler can notice that its client has gone (FIN or
// RST) without writing to it. cpp-httplib 0.11 hands handlers no socket, and a write may sit
// in the gzip compressor's buffer instead of reaching the socket, so writing is no test.
// Also: shutting down every connection a server accepted, which its stop needs.
#pragma once

namespace httplib {
struct Request;
}

namespace deepinfer::serve {

class ClientSocket {
 public:
  ClientSocket() = default;
  // The open socket whose local and peer addresses are the request's (found among this
  // process's descriptors); an unknown socket (found() false) is never reported gone.
  static ClientSocket of(const httplib::Request& req);
  bool found() const { return fd_ >= 0; }
  // True once the peer closed or reset the connection. Never blocks.
  bool gone() const;

 private:
  int fd_ = -1;
};

// Shuts down, both ways, every connected socket of this process whose local port is `port`:
// the connections a server listening on that port accepted. A thread blocked reading or
// writing one returns at once (end of file, or a failed write). Returns how many.
// cpp-httplib 0.11's Server::stop() only closes the listening socket, so without this a stop
// waits for each open connection's keep-alive, read or write timeout.
int shutdown_connections(int port);

}  // namespace deepinfer::serve
