#include "deepinfer/tools/bench_kv_transfer.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "deepinfer/base/timer.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/transfer/kv_transfer.h"

extern char** environ;

namespace deepinfer::tools {
namespace {

using namespace std::chrono_literals;

constexpr size_t kDefaultBytesPerSize = size_t{256} << 20;
constexpr double kGB = 1e9;

// One line from `fd` without the newline; empty on EOF, error or after `timeout`.
std::string read_line(int fd, std::chrono::milliseconds timeout) {
  const double deadline = now_seconds() + timeout.count() / 1e3;
  std::string line;
  while (true) {
    const int left_ms = static_cast<int>((deadline - now_seconds()) * 1e3);
    if (left_ms <= 0) return {};
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left_ms) <= 0) continue;
    char c;
    if (::read(fd, &c, 1) != 1) return {};
    if (c == '\n') return line;
    line += c;
  }
}

void write_line(int fd, const std::string& s) {
  const std::string line = s + "\n";
  if (::write(fd, line.data(), line.size()) < 0) std::perror("deepinfer: bench kv-transfer: pipe");
}

// The forked receiver: reports its address, counts what arrives, and on "done" (or the parent
// going away) reports "received <messages> <bytes>".
int receiver_process(int to_parent, int from_parent) {
  std::atomic<uint64_t> messages{0}, bytes{0};
  auto receiver = transfer::KvReceiver::create([&](uint64_t, std::vector<uint8_t> m) {
    bytes += m.size();
    messages++;
  });
  if (!receiver.is_ok()) {
    write_line(to_parent, "error " + receiver.status().message());
    return 1;
  }
  write_line(to_parent, "address " + (*receiver)->address());
  // "done <messages>": delivered to the sender means matched here, so the last messages may
  // still be landing; give them a moment.
  const std::string done = read_line(from_parent, 24h);
  const uint64_t expected = done.size() > 5 ? std::strtoull(done.c_str() + 5, nullptr, 10) : 0;
  const double deadline = now_seconds() + 5;
  while (messages < expected && now_seconds() < deadline) std::this_thread::sleep_for(1ms);
  write_line(to_parent, fmt::format("received {} {}", messages.load(), bytes.load()));
  return 0;
}

struct ReceiverProcess {
  pid_t pid = -1;
  int from_child = -1, to_child = -1;
  std::string address;
};

// Forks before this process has any UCX state, so the child starts clean.
Result<ReceiverProcess> start_receiver() {
  int up[2], down[2];
  if (::pipe(up) != 0 || ::pipe(down) != 0)
    return io_error("bench kv-transfer: pipe: {}", std::strerror(errno));
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) return io_error("bench kv-transfer: fork: {}", std::strerror(errno));
  if (pid == 0) {
    ::close(up[0]);
    ::close(down[1]);
    ::_exit(receiver_process(up[1], down[0]));
  }
  ::close(up[1]);
  ::close(down[0]);
  ReceiverProcess r;
  r.pid = pid;
  r.from_child = up[0];
  r.to_child = down[1];
  const std::string line = read_line(r.from_child, 30s);
  if (line.rfind("address ", 0) != 0)
    return io_error("bench kv-transfer: the receiver process did not start: '{}'", line);
  r.address = line.substr(8);
  return r;
}

// Waits for `pid` to exit, killing it after `timeout`.
void reap(pid_t pid, std::chrono::seconds timeout) {
  const double deadline = now_seconds() + static_cast<double>(timeout.count());
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (now_seconds() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return;
    }
    std::this_thread::sleep_for(5ms);
  }
}

int messages_for(size_t bytes, int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::clamp<size_t>(kDefaultBytesPerSize / bytes, 16, 4096));
}

// Sends `n` messages of `bytes` as one transfer and waits until all are delivered; GB/s.
Result<double> measure(transfer::KvSender& sender, const std::string& address, uint64_t transfer_id,
                       size_t bytes, int n) {
  std::vector<uint8_t> pattern(bytes);
  for (size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<uint8_t>(i * 131 + 7);
  std::vector<std::vector<uint8_t>> messages(n, pattern);  // built before the clock starts
  const double t0 = now_seconds();
  for (auto& m : messages) sender.send(address, transfer_id, std::move(m));
  DI_RETURN_IF_ERROR(sender.flush(transfer_id, 300s));
  return static_cast<double>(bytes) * n / (now_seconds() - t0) / kGB;
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) ::close(fd);
  return port > 0 ? port : 13337;
}

// Runs `argv` with `env` added to ours; its stdout when `out` is given. Killed after `timeout`.
int run_program(std::vector<std::string> argv, const std::vector<std::string>& env,
                std::string* out, std::chrono::seconds timeout) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  for (auto& s : argv) args.push_back(s.data());
  envp.push_back(nullptr);
  args.push_back(nullptr);
  int p[2];
  if (::pipe(p) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::close(p[0]);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(p[1]);
  const double deadline = now_seconds() + static_cast<double>(timeout.count());
  char buf[4096];
  while (true) {
    const int left_ms = static_cast<int>((deadline - now_seconds()) * 1e3);
    pollfd pf{p[0], POLLIN, 0};
    if (left_ms <= 0 || ::poll(&pf, 1, left_ms) <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    const ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n <= 0) break;
    if (out) out->append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// ucx_perftest's figure is only steady over enough data: at least what we sent, and 256 MiB.
int perftest_iterations(size_t bytes, int n) {
  const int for_volume = static_cast<int>(std::min<size_t>(kDefaultBytesPerSize / bytes, 100000));
  return std::max({n, 16, for_volume});
}

// ucx_perftest -t tag_bw between a server and a client on 127.0.0.1: its GB/s, or why not.
// Plain tag_bw (no peer-failure handling: UCX's best case; its `-e` runs were erratic here,
// docs/kv_transfer.md).
Result<double> perftest_gb_per_s(const std::string& binary, size_t bytes, int n) {
  // The same transports as ours (unless UCX_TLS is set, which both then use).
  std::vector<std::string> env;
  if (!std::getenv("UCX_TLS"))
    env.push_back(fmt::format("UCX_TLS={}", transfer::kDefaultUcxTransports));
  const std::string port = std::to_string(free_tcp_port()), size = std::to_string(bytes),
                    iters = std::to_string(perftest_iterations(bytes, n));
  const std::vector<std::string> server_args = {binary, "-t",  "tag_bw", "-s", size,
                                                "-n",   iters, "-p",     port};
  const std::vector<std::string> client_args = {binary, "127.0.0.1", "-t",  "tag_bw", "-s",
                                                size,   "-n",        iters, "-p",     port};
  std::thread server([&] { run_program(server_args, env, nullptr, 120s); });
  std::string out;
  int rc = -1;
  for (int attempt = 0; attempt < 5 && rc != 0; ++attempt) {
    std::this_thread::sleep_for(300ms);  // the server has to be listening
    out.clear();
    rc = run_program(client_args, env, &out, 120s);
  }
  server.join();
  // "Final:  iters  p50  avg  overall  bw_avg  bw_overall  rate_avg  rate_overall"; MB = MiB.
  const size_t at = out.find("Final:");
  if (rc != 0 || at == std::string::npos)
    return io_error("ucx_perftest failed (exit {}): {}", rc,
                    out.substr(out.size() > 400 ? out.size() - 400 : 0));
  std::stringstream line(out.substr(at, out.find('\n', at) - at));
  std::string word;
  std::vector<std::string> fields;
  while (line >> word) fields.push_back(word);
  if (fields.size() < 9) return io_error("ucx_perftest: unexpected result line '{}'", line.str());
  return std::stod(fields[6]) * 1048576.0 / kGB;
}

// ucx_perftest's figure for the same size and our ratio to it, or why there is none.
void add_perftest_figure(const std::string& perftest, size_t bytes, int n, nlohmann::json& j) {
  if (perftest.empty()) {
    j["perftest"] = "ucx_perftest not found on PATH";
    return;
  }
  auto pt = perftest_gb_per_s(perftest, bytes, n);
  if (!pt.is_ok()) {
    j["perftest"] = pt.status().message();
    return;
  }
  j["perftest_gb_per_s"] = *pt;
  j["ratio_to_perftest"] = j["gb_per_s"].get<double>() / *pt;
}

}  // namespace

int run_kv_transfer_bench(const KvTransferBenchOptions& opts) {
  auto receiver = start_receiver();
  if (!receiver.is_ok()) return report_error(receiver.status());
  auto sender = transfer::KvSender::create();
  if (!sender.is_ok()) return report_error(sender.status());
  const std::string perftest = find_on_path("ucx_perftest");
  uint64_t sent = 0, sent_bytes = 0;
  int exit_code = kExitOk;
  uint64_t transfer_id = 1;
  for (size_t bytes : opts.message_bytes) {
    for (int rep = 0; rep < opts.repeat && exit_code == kExitOk; ++rep) {
      const int n = messages_for(bytes, opts.messages);
      // Warm-up: connection setup and the first rendezvous stay out of the figure.
      auto warm = measure(**sender, receiver->address, transfer_id++, bytes, 2);
      auto gbs =
          warm.is_ok() ? measure(**sender, receiver->address, transfer_id++, bytes, n) : warm;
      if (!gbs.is_ok()) {
        exit_code = report_error(gbs.status());
        break;
      }
      sent += n + 2;
      sent_bytes += bytes * (n + 2);
      nlohmann::json j = {
          {"mode", "kv-transfer"}, {"message_bytes", bytes}, {"messages", n}, {"gb_per_s", *gbs}};
      add_perftest_figure(perftest, bytes, n, j);
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    }
  }
  write_line(receiver->to_child, fmt::format("done {}", sent));
  const std::string got = read_line(receiver->from_child, 30s);
  ::close(receiver->to_child);
  ::close(receiver->from_child);
  reap(receiver->pid, 10s);
  if (exit_code == kExitOk && got != fmt::format("received {} {}", sent, sent_bytes))
    return report_error(
        io_error("bench kv-transfer: sent {} messages ({} bytes) but the receiver reports '{}'",
                 sent, sent_bytes, got));
  return exit_code;
}

}  // namespace deepinfer::tools
