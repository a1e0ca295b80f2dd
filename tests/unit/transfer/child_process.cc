#include "child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "deepinfer/transfer/kv_transfer.h"
#include "test_messages.h"

extern char** environ;

namespace deepinfer::transfer::testing {

namespace {
constexpr const char* kFdVar = "DEEPINFER_TRANSFER_CHILD_FD";
constexpr const char* kMessagesVar = "DEEPINFER_TRANSFER_CHILD_MESSAGES";
constexpr const char* kAddressVar = "DEEPINFER_TRANSFER_CHILD_ADDRESS";
constexpr const char* kBytesVar = "DEEPINFER_TRANSFER_CHILD_BYTES";

// Runs TransferChild.DISABLED_<test> in a new process with `env` added; its pipe to us is
// $DEEPINFER_TRANSFER_CHILD_FD.
ChildProcess spawn_child(const std::string& test, std::vector<std::string> env) {
  ChildProcess child;
  int fds[2];
  if (::pipe(fds) != 0) return child;
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (this process runs UCX threads).
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  env.push_back(fmt::format("{}={}", kFdVar, fds[1]));
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe", filter = "--gtest_filter=TransferChild.DISABLED_" + test,
              disabled = "--gtest_also_run_disabled_tests";
  char* argv[] = {self.data(), filter.data(), disabled.data(), nullptr};
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (devnull >= 0) ::dup2(devnull, 1);  // gtest's own report; failures still reach stderr
    ::execve(argv[0], argv, envp.data());
    ::_exit(127);
  }
  if (devnull >= 0) ::close(devnull);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return child;
  }
  child.pid = pid;
  child.from_child = fds[0];
  return child;
}

}  // namespace

size_t message_size(int i) {
  static constexpr size_t kSizes[] = {16 << 10, (64 << 10) + 3, 512 << 10, (2 << 20) + 1};
  return kSizes[i % 4];
}

ChildProcess spawn_receiver_child(int messages) {
  ChildProcess child = spawn_child("Receiver", {fmt::format("{}={}", kMessagesVar, messages)});
  if (child.pid < 0) return child;
  const std::string line = read_line(child.from_child, std::chrono::seconds(20));
  if (line.rfind("address ", 0) == 0) child.address = line.substr(8);
  return child;
}

ChildProcess spawn_sender_child(const std::string& address, int messages, size_t bytes) {
  return spawn_child("Sender", {fmt::format("{}={}", kAddressVar, address),
                                fmt::format("{}={}", kMessagesVar, messages),
                                fmt::format("{}={}", kBytesVar, bytes)});
}

std::string read_line(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {};
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char c;
    if (::read(fd, &c, 1) != 1) return {};
    if (c == '\n') return line;
    line += c;
  }
}

int reap_child(ChildProcess& child, std::chrono::milliseconds timeout) {
  if (child.pid <= 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(child.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child.pid, SIGKILL);
      ::waitpid(child.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  child.pid = -1;
  if (child.from_child >= 0) ::close(child.from_child);
  child.from_child = -1;
  return status;
}

namespace {

void write_line(int fd, const std::string& s) {
  const std::string line = s + "\n";
  ssize_t n = ::write(fd, line.data(), line.size());
  (void)n;
}

// The child's side: receive, check every message byte for byte and in order per transfer,
// report "ok <messages> <bytes>" or "bad <what>".
TEST(TransferChild, DISABLED_Receiver) {
  const char* fd_text = std::getenv(kFdVar);
  const char* messages_text = std::getenv(kMessagesVar);
  ASSERT_TRUE(fd_text && messages_text) << "only started by spawn_receiver_child";
  const int fd = std::atoi(fd_text);
  const int expected = std::atoi(messages_text);

  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, uint64_t> next_index;  // per transfer
  int received = 0;
  std::string problem;
  auto receiver = KvReceiver::create([&](uint64_t id, std::vector<uint8_t> m) {
    std::lock_guard lock(mu);
    const uint64_t index = next_index[id]++;
    const int i = static_cast<int>(index * kTransfers + (id - kFirstTransfer));
    std::string bad = id >= kFirstTransfer && id < kFirstTransfer + kTransfers
                          ? check_message(id, index, message_size(i), m)
                          : fmt::format("unexpected transfer id {}", id);
    if (problem.empty() && !bad.empty()) problem = bad;
    ++received;
    cv.notify_all();
  });
  ASSERT_TRUE(receiver.is_ok()) << receiver.status().message();
  write_line(fd, "address " + (*receiver)->address());
  std::unique_lock lock(mu);
  if (expected == 0) {  // the parent kills us
    cv.wait_for(lock, std::chrono::seconds(60), [] { return false; });
    return;
  }
  cv.wait_for(lock, std::chrono::seconds(30),
              [&] { return received >= expected || !problem.empty(); });
  const KvReceiverStats st = (*receiver)->stats();
  if (!problem.empty())
    write_line(fd, "bad " + problem);
  else if (received != expected)
    write_line(fd, fmt::format("bad received {} of {} messages", received, expected));
  else
    write_line(fd, fmt::format("ok {} {}", st.messages, st.bytes));
}

// The child's side of spawn_sender_child.
TEST(TransferChild, DISABLED_Sender) {
  const char* fd_text = std::getenv(kFdVar);
  const char* address = std::getenv(kAddressVar);
  const char* messages_text = std::getenv(kMessagesVar);
  const char* bytes_text = std::getenv(kBytesVar);
  ASSERT_TRUE(fd_text && address && messages_text && bytes_text)
      << "only started by spawn_sender_child";
  const int fd = std::atoi(fd_text);
  auto sender = KvSender::create();
  ASSERT_TRUE(sender.is_ok()) << sender.status().message();
  const int messages = std::atoi(messages_text);
  const size_t bytes = std::strtoull(bytes_text, nullptr, 10);
  for (int i = 0; i < messages; ++i)
    (*sender)->send(address, kSenderChildTransfer, make_message(kSenderChildTransfer, i, bytes));
  write_line(fd, "queued");
  Status st = (*sender)->flush(kSenderChildTransfer, std::chrono::seconds(60));
  write_line(fd, "flushed " + (st.is_ok() ? std::string("ok") : st.message()));
}

}  // namespace
}  // namespace deepinfer::transfer::testing
