// Peers in another process: this test binary started again (fork + exec) to run only one
// TransferChild.DISABLED_* test, which reports on a pipe: a receiver (its address, then what it
// got) or a sender (sends to a given address until killed).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace deepinfer::transfer::testing {

// Message i of the two-process exchange: transfer kFirstTransfer + i % kTransfers, index
// i / kTransfers, size message_size(i).
constexpr uint64_t kFirstTransfer = 1000;
constexpr int kTransfers = 4;
size_t message_size(int i);

struct ChildProcess {
  pid_t pid = -1;
  int from_child = -1;  // the child's report lines
  std::string address;  // a receiver's; empty when it did not start
};

// Starts a receiver process that expects `messages` messages (0: receive until killed).
ChildProcess spawn_receiver_child(int messages);
// Starts a sender process that sends `messages` messages of `bytes` as transfer
// kSenderChildTransfer to `address`, reporting "queued" once they are, and "flushed <status>".
constexpr uint64_t kSenderChildTransfer = 77;
ChildProcess spawn_sender_child(const std::string& address, int messages, size_t bytes);
// One line from the child without its newline; empty on EOF or after `timeout`.
std::string read_line(int fd, std::chrono::milliseconds timeout);
// Waits for the child to exit (killing it after `timeout`); its exit status as waitpid gives it.
int reap_child(ChildProcess& child, std::chrono::milliseconds timeout);

}  // namespace deepinfer::transfer::testing
