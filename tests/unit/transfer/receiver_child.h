// A receiver in another process: this test binary started again (fork + exec) to run only
// TransferChild.DISABLED_Receiver, which reports its address and results on a pipe.
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

struct ReceiverChild {
  pid_t pid = -1;
  int from_child = -1;  // the child's report lines
  std::string address;  // empty when the child did not start
};

// Starts a receiver process that expects `messages` messages (0: receive until killed).
ReceiverChild spawn_receiver_child(int messages);
// One line from the child without its newline; empty on EOF or after `timeout`.
std::string read_line(int fd, std::chrono::milliseconds timeout);
// Waits for the child to exit (killing it after `timeout`); its exit status as waitpid gives it.
int reap_child(ReceiverChild& child, std::chrono::milliseconds timeout);

}  // namespace deepinfer::transfer::testing
