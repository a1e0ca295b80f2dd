// See bench_serve.h. Each client is a thread with its own connection; it records when the
// first text chunk arrived, when the stream ended and the usage the server reported, so the
// numbers include HTTP, JSON, SSE and detokenization, as a user of the API sees them.
#include "deepinfer/tools/bench_serve.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "deepinfer/base/timer.h"
#include "deepinfer/serve/http_server.h"
#include "deepinfer/tools/bench_plot.h"
#include "deepinfer/tools/synthetic_prompt.h"

extern char** environ;

namespace deepinfer::tools {
namespace {

using Json = nlohmann::json;

// Milliseconds since construction.
class Timer {
 public:
  Timer() : t0_(now_seconds()) {}
  double elapsed_ms() const { return (now_seconds() - t0_) * 1e3; }

 private:
  double t0_;
};

struct ClientResult {
  double ttft_ms = -1, end_ms = 0;
  int completion_tokens = 0;
  std::string error;
};

// Streams one completion; times are from `t0` (the moment every client was released).
ClientResult run_client(int port, const std::string& model, const std::vector<int32_t>& prompt, int gen_len,
                        const Timer& t0) {
  ClientResult r;
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(600, 0);
  Json body = {{"model", model},       {"prompt", prompt}, {"max_tokens", gen_len}, {"ignore_eos", true},
               {"temperature", 0},     {"stream", true},   {"stream_options", {{"include_usage", true}}}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  std::string pending;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    pending.append(data, len);
    size_t nl;
    while ((nl = pending.find("\n\n")) != std::string::npos) {
      std::string event = pending.substr(0, nl);
      pending.erase(0, nl + 2);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
      Json j = Json::parse(event.substr(6), nullptr, false);
      if (j.is_discarded()) continue;
      if (r.ttft_ms < 0 && j.contains("choices") && !j["choices"].empty() &&
          !j["choices"][0].value("text", std::string()).empty())
        r.ttft_ms = t0.elapsed_ms();
      if (j.contains("usage") && j["usage"].is_object())
        r.completion_tokens = j["usage"].value("completion_tokens", 0);
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  if (!cli.send(req, res, err)) r.error = fmt::format("request failed: {}", httplib::to_string(err));
  else if (res.status != 200) r.error = fmt::format("HTTP {}: {}", res.status, res.body.substr(0, 200));
  r.end_ms = t0.elapsed_ms();
  return r;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// Deterministic text mixing the kinds a tokenizer meets: prose, code, numbers, non-ASCII.
std::string mixed_text(size_t bytes) {
  static const char* const kPieces[] = {
      "The quick brown fox jumps over the lazy dog. ", "It was the best of times, it was the worst of times; ",
      "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n", "def f(x):\n    return {\"k\": x ** 2}\n",
      "3.14159 2718 1,000,000 0x1F 2026-11-29T18:20:05Z ", "Grüße aus Köln, naïve café — ", "日本語のテキストと漢字。",
      "Привет, мир! ", "😀 emoji 🚀 ", "   indented\tand\ttabbed\n\n"};
  std::string out;
  uint32_t x = 12345;
  while (out.size() < bytes) {
    x = x * 1103515245u + 12345u;
    out += kPieces[(x >> 16) % (sizeof(kPieces) / sizeof(kPieces[0]))];
  }
  return out;
}

// Runs every client count against the server on `port`, appending one record each.
int measure(int port, const std::string& model, int32_t vocab, const ServeBenchOptions& opts,
            const std::string& deployment, int& seq, std::vector<Json>& records) {
  int exit_code = kExitOk;
  // One small request first, so first-touch costs stay out of the numbers.
  ClientResult warm = run_client(port, model, synthetic_prompt(16, 77'777, vocab), 4, Timer());
  if (!warm.error.empty()) {
    std::fprintf(stderr, "bench --mode serve: warm-up request: %s\n", warm.error.c_str());
    exit_code = kExitRuntimeError;
  }
  for (int b : opts.batches) {
    for (int rep = 0; rep < opts.repeat && exit_code == kExitOk; ++rep) {
      std::vector<std::vector<int32_t>> prompts;
      for (int i = 0; i < b; ++i) prompts.push_back(synthetic_prompt(opts.prompt_len, seq++, vocab));
      std::vector<ClientResult> results(b);
      std::vector<std::thread> clients;
      Timer t0;
      for (int i = 0; i < b; ++i)
        clients.emplace_back([&, i] { results[i] = run_client(port, model, prompts[i], opts.gen_len, t0); });
      for (auto& c : clients) c.join();
      const double wall_ms = t0.elapsed_ms();
      std::vector<double> ttft;
      double tokens = 0, per_seq = 0;
      for (const auto& r : results) {
        if (!r.error.empty()) {
          std::fprintf(stderr, "bench --mode serve: %s\n", r.error.c_str());
          exit_code = kExitRuntimeError;
          continue;
        }
        ttft.push_back(r.ttft_ms);
        tokens += r.completion_tokens;
        if (r.completion_tokens > 1 && r.end_ms > r.ttft_ms)
          per_seq += (r.completion_tokens - 1) / ((r.end_ms - r.ttft_ms) / 1e3);
      }
      if (exit_code != kExitOk) break;
      double mean_ttft = 0;
      for (double t : ttft) mean_ttft += t / ttft.size();
      Json j = {{"mode", "serve"},
                {"batch", b},
                {"prompt_tokens", opts.prompt_len},
                {"gen_tokens", opts.gen_len},
                {"tokens_per_s", tokens / (wall_ms / 1e3)},
                {"per_seq_tokens_per_s", per_seq / b},
                {"ttft_ms", mean_ttft},
                {"ttft_ms_p50", percentile(ttft, 0.5)},
                {"ttft_ms_p99", percentile(ttft, 0.99)},
                {"wall_ms", wall_ms},
                {"model", model},
                {"deployment", deployment}};
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
      records.push_back(j);
    }
  }
  return exit_code;
}

// `deepinfer cluster` on free ports: its entrypoint's port once it printed its table, or -1.
int start_cluster(const ServeBenchOptions& opts, const std::string& model, pid_t& pid, std::string& log) {
  char dir[] = "/tmp/deepinfer-bench-cluster-XXXXXX";
  if (mkdtemp(dir) == nullptr) return -1;
  log = std::string(dir) + "/cluster.out";
  const int port = free_loopback_port();
  const int threads = std::max(1, (opts.engine.threads > 0 ? opts.engine.threads : int(std::thread::hardware_concurrency())) / 2);
  std::vector<std::string> args = {"deepinfer", "cluster", "--prefill", std::to_string(opts.disaggregated_prefill),
                                    "--decode", std::to_string(opts.disaggregated_decode), "--port", std::to_string(port),
                                    "--threads", std::to_string(threads), "--log-dir", dir,
                                    "--served-model-name", model,
                                    "--kv-cache-gb", fmt::format("{}", opts.engine.kv_cache_gb)};
  if (!opts.engine.model.empty()) args.insert(args.end(), {"--model", opts.engine.model});
  if (opts.engine.batch_invariant) args.push_back("--batch-invariant");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  for (int i = 0; i < 6000; ++i) {  // up to 10 minutes of model loading
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return -1;
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("Ctrl-C stops them all") != std::string::npos) return port;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGINT);
  waitpid(pid, nullptr, 0);
  return -1;
}

}  // namespace

int run_serve_bench(const ServeBenchOptions& opts) {
  auto loaded = load_model_for_cli(opts.engine.model);
  if (!loaded.is_ok()) return report_error(loaded.status());
  int max_batch = 1;
  for (int b : opts.batches) max_batch = std::max(max_batch, b);
  EngineFlags ef = opts.engine;
  ef.enable_prefix_caching = false;  // distinct synthetic prompts; nothing to reuse
  ef.max_num_seqs = std::max(ef.max_num_seqs, max_batch);
  auto eng = make_engine(*loaded, ef);
  if (!eng.is_ok()) return report_error(eng.status());
  const int32_t vocab = loaded->tokenizer->vocab_size();
  const std::string model = loaded->name;

  serve::ServeOptions so;
  so.port = 0;
  so.served_model_name = model;
  so.http_threads = std::max(16, max_batch + 8);
  // The port once listening, or -1 when the server returned without listening (a bind error):
  // then there is nothing to stop, and no signal is raised.
  std::promise<int> listening;
  std::future<int> port_future = listening.get_future();
  bool listened = false;
  Status server_status;
  std::thread server([&] {
    server_status = serve::run_http_server(std::move(eng).value(), so, [&](int port) {
      listened = true;
      listening.set_value(port);
    });
    if (!listened) listening.set_value(-1);
  });
  const int port = port_future.get();
  if (port < 0) {
    server.join();
    return report_error(server_status.is_ok() ? io_error("bench: the server stopped before listening") : server_status);
  }
  int seq = 0;
  std::vector<Json> records;
  int exit_code = measure(port, model, vocab, opts, "all-in-one", seq, records);
  std::raise(SIGTERM);  // the server's own graceful stop
  server.join();
  if (!server_status.is_ok()) return report_error(server_status);
  if (exit_code == kExitOk && opts.disaggregated_prefill > 0) {
    pid_t pid = -1;
    std::string log;
    const int cport = start_cluster(opts, model, pid, log);
    if (cport < 0)
      return report_error(io_error("bench --mode serve: the disaggregated cluster did not start (see {})", log));
    exit_code = measure(cport, model, vocab, opts,
                          fmt::format("disaggregated {}P+{}D", opts.disaggregated_prefill, opts.disaggregated_decode),
                          seq, records);
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    // The cluster's logs are kept only when something went wrong.
    const std::string dir = std::filesystem::path(log).parent_path().string();
    if (exit_code == kExitOk && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    } else {
      std::fprintf(stderr, "bench --mode serve: the cluster's logs are in %s\n", dir.c_str());
    }
  }
  if (exit_code == kExitOk && !opts.plot.empty()) {
    Status st = write_throughput_plot(opts.plot, "serve", records);
    if (!st.is_ok()) return report_error(st);
  }
  return exit_code;
}

int run_tokenize_bench(const TokenizeBenchOptions& opts) {
  auto loaded = load_model_for_cli(opts.model);
  if (!loaded.is_ok()) return report_error(loaded.status());
  const std::string text = mixed_text(static_cast<size_t>(opts.megabytes) << 20);
  const recipe::Tokenizer& tok = *loaded->tokenizer;
  tok.encode(text.substr(0, 4096));  // warm-up
  for (int rep = 0; rep < opts.repeat; ++rep) {
    Timer t;
    std::vector<int32_t> ids = tok.encode(text);
    const double s = t.elapsed_ms() / 1e3;
    Json j = {{"mode", "tokenize"},
              {"batch", 1},
              {"prompt_tokens", ids.size()},
              {"bytes", text.size()},
              {"tokens_per_s", ids.size() / s},
              {"per_seq_tokens_per_s", ids.size() / s},
              {"mb_per_s", text.size() / s / 1e6},
              {"model", loaded->name}};
    std::printf("%s\n", j.dump().c_str());
  }
  return kExitOk;
}

}  // namespace deepinfer::tools
