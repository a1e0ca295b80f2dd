// `deepinfer cluster`: a whole disaggregated deployment on this host, for a person trying it
// and for tests: N prefill engines, M decode engines and the entrypoint, each a `deepinfer serve`
// process of this binary with its own port and log file (chosen and printed), started in order
// (engines first, each waited for until /health answers), stopped together on SIGINT/SIGTERM.
// deploy/ holds the same roles as Kubernetes manifests.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>

#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/subcommands.h"

extern char** environ;

namespace deepinfer::tools {
namespace {

struct ClusterFlags {
  int prefill = 1;
  int decode = 1;
  std::string model;
  std::string served_model_name;
  std::string host = "127.0.0.1";
  int port = 8000;  // the entrypoint's; engines get free ports
  std::string log_dir;
  int threads = 0;  // per engine; 0 = the engine's default
  bool batch_invariant = false;
  std::vector<std::string> kv_store;
  double kv_cache_gb = 0;
  std::string kv_cache_dtype;  // every engine must use the same (it is part of the KV namespace)
  std::string kv_transfer;     // prefill engines: by-layer | by-block
  int start_timeout_s = 600;
};

struct Child {
  std::string name;
  pid_t pid = -1;
  int port = 0;
  std::string log;
};

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

std::string tail_of(const std::string& path, size_t bytes = 2000) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

Result<Child> spawn(const std::string& name, const std::vector<std::string>& args, const std::string& log, int port) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return io_error("cluster: cannot start {}: {}", name, std::strerror(rc));
  return Child{name, pid, port, log};
}

// Waits for GET /health to answer 200; an error if the process died or time ran out.
Status wait_healthy(const Child& c, const std::string& host, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline && !g_stop) {
    int status = 0;
    if (waitpid(c.pid, &status, WNOHANG) == c.pid)
      return io_error("cluster: {} exited while starting; the end of {}:\n{}", c.name, c.log, tail_of(c.log));
    httplib::Client cli(host, c.port);
    cli.set_connection_timeout(1, 0);
    if (auto r = cli.Get("/health"); r && r->status == 200) return Status::ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (g_stop) return io_error("cluster: stopped while {} was starting", c.name);
  return io_error("cluster: {} did not become healthy within {} s (see {})", c.name, timeout_s, c.log);
}

void stop_all(std::vector<Child>& children) {
  for (auto it = children.rbegin(); it != children.rend(); ++it)
    if (it->pid > 0) kill(it->pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (auto& c : children) {
    while (c.pid > 0) {
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) != 0) break;
      if (std::chrono::steady_clock::now() > deadline) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    c.pid = -1;
  }
}

int run_cluster(ClusterFlags& f) {
  if (f.log_dir.empty()) {
    char tmpl[] = "/tmp/deepinfer-cluster-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return report_error(io_error("cluster: cannot create a log directory"));
    f.log_dir = tmpl;
  }
  std::error_code ec;
  std::filesystem::create_directories(f.log_dir, ec);
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<std::string> engine_args;
  if (!f.model.empty()) engine_args.insert(engine_args.end(), {"--model", f.model});
  if (f.threads > 0) engine_args.insert(engine_args.end(), {"--threads", std::to_string(f.threads)});
  if (f.batch_invariant) engine_args.push_back("--batch-invariant");
  if (f.kv_cache_gb > 0) engine_args.insert(engine_args.end(), {"--kv-cache-gb", fmt::format("{}", f.kv_cache_gb)});
  if (!f.kv_cache_dtype.empty()) engine_args.insert(engine_args.end(), {"--kv-cache-dtype", f.kv_cache_dtype});
  for (const auto& d : f.kv_store) engine_args.insert(engine_args.end(), {"--kv-store", d});

  std::vector<Child> children;
  std::vector<std::string> urls[2];
  const char* roles[2] = {"prefill", "decode"};
  const int counts[2] = {f.prefill, f.decode};
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < counts[r]; ++i) {
      const int port = free_loopback_port();
      const std::string name = fmt::format("{}-{}", roles[r], i);
      std::vector<std::string> args = {"deepinfer", "serve", "--role", roles[r], "--host", f.host,
                                        "--port", std::to_string(port)};
      args.insert(args.end(), engine_args.begin(), engine_args.end());
      if (r == 0 && !f.kv_transfer.empty()) args.insert(args.end(), {"--kv-transfer", f.kv_transfer});
      auto c = spawn(name, args, f.log_dir + "/" + name + ".log", port);
      if (!c.is_ok()) {
        stop_all(children);
        return report_error(c.status());
      }
      children.push_back(*c);
      urls[r].push_back(fmt::format("http://{}:{}", f.host, port));
    }
  }
  for (const auto& c : children) {
    Status st = wait_healthy(c, f.host, f.start_timeout_s);
    if (!st.is_ok()) {
      stop_all(children);
      return report_error(st);
    }
  }
  std::vector<std::string> args = {"deepinfer", "serve", "--role", "entrypoint", "--host", f.host,
                                    "--port", std::to_string(f.port), "--prefill", fmt::format("{}", fmt::join(urls[0], ",")),
                                    "--decode", fmt::format("{}", fmt::join(urls[1], ","))};
  if (!f.model.empty()) args.insert(args.end(), {"--model", f.model});
  if (!f.served_model_name.empty()) args.insert(args.end(), {"--served-model-name", f.served_model_name});
  for (const auto& d : f.kv_store) args.insert(args.end(), {"--kv-store", d});  // its store lookups
  auto entry = spawn("entrypoint", args, f.log_dir + "/entrypoint.log", f.port);
  if (!entry.is_ok()) {
    stop_all(children);
    return report_error(entry.status());
  }
  children.push_back(*entry);
  Status st = wait_healthy(children.back(), f.host, 120);
  if (!st.is_ok()) {
    stop_all(children);
    return report_error(st);
  }
  fmt::print("deepinfer cluster: {} prefill + {} decode engines behind http://{}:{}\n", f.prefill, f.decode, f.host, f.port);
  for (const auto& c : children)
    fmt::print("  {:<12} pid {:<8} http://{}:{}  log {}\n", c.name, c.pid, f.host, c.port, c.log);
  fmt::print("Ctrl-C stops them all.\n");
  std::fflush(stdout);
  while (!g_stop) {
    for (auto& c : children) {
      int status = 0;
      if (c.pid > 0 && waitpid(c.pid, &status, WNOHANG) == c.pid) {
        fmt::print(stderr, "deepinfer cluster: {} (pid {}) exited; the others keep serving (see {})\n", c.name, c.pid, c.log);
        c.pid = -1;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  fmt::print(stderr, "deepinfer cluster: stopping\n");
  stop_all(children);
  return kExitOk;
}

}  // namespace

Subcommand make_cluster_command() {
  auto f = std::make_shared<ClusterFlags>();
  Subcommand s;
  s.add = [f](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand(
        "cluster", "Start a disaggregated deployment on this host: prefill and decode engines and the entrypoint "
                   "(serve --role ...), ports and logs chosen and printed; Ctrl-C stops all");
    cmd->add_option("--prefill", f->prefill, "Prefill engines (default 1)")->check(CLI::Range(1, 64));
    cmd->add_option("--decode", f->decode, "Decode engines (default 1)")->check(CLI::Range(1, 64));
    cmd->add_option("--model", f->model, "Model: catalogue name, Hugging Face directory or .gguf (default: the default model)");
    cmd->add_option("--served-model-name", f->served_model_name, "The model name clients send (the entrypoint's)");
    cmd->add_option("--host", f->host, "Address every process listens on (default 127.0.0.1)");
    cmd->add_option("--port", f->port, "The entrypoint's port, the public API (default 8000)")->check(CLI::Range(1, 65535));
    cmd->add_option("--log-dir", f->log_dir, "Directory for each process's log (default: a new /tmp/deepinfer-cluster-*)");
    cmd->add_option("--threads", f->threads, "Compute threads per engine (default: the engine's)")->check(CLI::Range(0, 1024));
    cmd->add_flag("--batch-invariant", f->batch_invariant, "Engines in batch-invariant mode");
    cmd->add_option("--kv-store", f->kv_store, "KV store directory shared by every engine (repeatable)");
    cmd->add_option("--kv-cache-gb", f->kv_cache_gb, "KV cache per engine in GiB");
    cmd->add_option("--kv-cache-dtype", f->kv_cache_dtype, "KV cache element type of every engine: auto, f32, bf16, f16")
        ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}));
    cmd->add_option("--kv-transfer", f->kv_transfer, "Prefill engines: by-layer (default) or by-block")
        ->check(CLI::IsMember({"by-layer", "by-block"}));
    cmd->add_option("--start-timeout", f->start_timeout_s, "Seconds to wait for each engine to load (default 600)")
        ->check(CLI::Range(1, 86400));
    return cmd;
  };
  s.run = [f] { return run_cluster(*f); };
  return s;
}

}  // namespace deepinfer::tools
