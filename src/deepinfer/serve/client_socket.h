// The socket a request arrived on, so a handler can notice that its client has gone (FIN or
// RST) without writing to it. cpp-httplib 0.11 hands handlers no socket, and a write may sit
// in the gzip compressor's buffer instead of reaching the socket, so writing is no test.
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

}  // namespace deepinfer::serve
