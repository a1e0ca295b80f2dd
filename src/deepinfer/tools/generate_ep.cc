// generate --ep: flags, the placement, joining (or starting) the MPI job.
#include "deepinfer/tools/generate_ep.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "deepinfer/model/layers/linear.h"  // inline_pool
#include "deepinfer/parallel/eplb.h"
#include "deepinfer/parallel/expert_trace.h"

namespace deepinfer::tools {

void add_ep_flags(CLI::App& app, EpFlags& f) {
  app.add_option("--ep", f.ep,
                 "Expert-parallel ranks (MoE models): run under `mpirun -n N`, or give it alone "
                 "and deepinfer starts mpirun itself; requests are spread over the ranks")
      ->check(CLI::Range(1, 1024));
  app.add_option(
      "--eplb-trace", f.eplb_trace,
      "With --ep: place experts with EPLB from this expert trace (`generate --expert-trace`)");
  app.add_option("--ep-redundant,--redundant", f.redundant,
                 "Redundant expert replicas (default 0), placed with --eplb-trace; with serve also "
                 "by live EPLB")
      ->check(CLI::Range(0, 1 << 20));
}

int eplb_interval(const EpFlags& f) {
  if (f.eplb_interval >= 0) return f.eplb_interval;
  return f.redundant > 0 ? kDefaultEplbInterval : 0;
}

Result<parallel::EpPlacement> ep_placement(const EpFlags& f, const model::ModelConfig& c) {
  const int layers = c.num_layers + 1;  // + the MTP layer's row
  if (c.n_routed_experts <= 0)
    return invalid_argument("--ep {}: model '{}' has no routed experts", f.ep, c.architecture);
  if (f.redundant > 0 && f.eplb_trace.empty() && eplb_interval(f) == 0)
    return invalid_argument(
        "--ep-redundant needs --eplb-trace (the load that decides which experts to copy) or, with "
        "serve, live EPLB (--eplb-interval)");
  if (f.eplb_trace.empty() && f.redundant == 0)
    return parallel::contiguous_placement(layers, c.n_routed_experts, f.ep);
  parallel::ExpertTrace t;
  if (f.eplb_trace.empty()) {  // live EPLB moves replicas to the hot experts; start from even load
    t.num_experts = c.n_routed_experts;
    t.num_groups = c.n_group;
    for (int l = 0; l < layers; ++l) t.layers.push_back(l);
    t.total.assign(size_t(layers), std::vector<uint64_t>(size_t(c.n_routed_experts), 1));
  } else {
    DI_ASSIGN_OR_RETURN(t, parallel::read_expert_trace(f.eplb_trace));
  }
  if (t.num_experts != c.n_routed_experts)
    return invalid_argument("--eplb-trace {}: {} experts, the model has {}", f.eplb_trace,
                            t.num_experts, c.n_routed_experts);
  for (int l : t.layers)
    if (l < 0 || l >= layers)
      return invalid_argument("--eplb-trace {}: layer {} is not in the model", f.eplb_trace, l);
  std::vector<float> w;
  for (const auto& row : t.total)
    for (uint64_t v : row) w.push_back(static_cast<float>(v));
  const int physical = c.n_routed_experts + f.redundant;
  if (physical % f.ep != 0)
    return invalid_argument(
        "--ep {} does not divide {} physical experts ({} experts + {} redundant)", f.ep, physical,
        c.n_routed_experts, f.redundant);
  parallel::EplbOptions o{
      .num_physical = physical, .num_groups = t.num_groups, .num_nodes = 1, .num_gpus = f.ep};
  DI_ASSIGN_OR_RETURN(
      parallel::EplbPlacement p,
      parallel::eplb_rebalance(w, static_cast<int>(t.layers.size()), t.num_experts, o));
  return parallel::placement_from_eplb(p, t.layers, layers, f.ep);
}

namespace {

// Where a signal to the launcher goes: rank 0 when it wrote its pid to `pidfile` (serve: it then
// stops gracefully and tells the other ranks), else mpirun (which ends the job).
pid_t forward_target(const std::string& pidfile, pid_t mpirun) {
  std::ifstream in(pidfile);
  long pid = 0;
  if (!pidfile.empty() && in >> pid && pid > 0 && kill(pid_t(pid), 0) == 0) return pid_t(pid);
  return mpirun;
}

// Waits for mpirun, forwarding SIGINT and SIGTERM (blocked in this process) as they come.
int wait_forwarding(pid_t pid, const std::string& pidfile, const sigset_t& forwarded) {
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return report_error(io_error("waiting for mpirun failed"));
    timespec tick{0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&forwarded, nullptr, &tick);
    if (sig > 0) kill(forward_target(pidfile, pid), sig);
  }
  // mpirun --enable-recovery exits 0 even when its ranks failed: a rank 0 that started (wrote
  // its pid) says how it ended in "<pidfile>.status" (serve_ep.cc); none means it was killed.
  int rank0 = -1;
  if (!pidfile.empty()) {
    const bool started = std::ifstream(pidfile).good();
    std::ifstream in(pidfile + ".status");
    if (!(in >> rank0) && started) rank0 = kExitRuntimeError;
    if (!in && started)
      std::fprintf(stderr, "deepinfer: expert-parallel rank 0 ended without a clean stop (killed?)\n");
    std::remove((pidfile + ".status").c_str());
    std::remove(pidfile.c_str());
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 && rank0 > 0 ? rank0 : WEXITSTATUS(status);
  return report_error(io_error("mpirun ended by signal {}", WTERMSIG(status)));
}

}  // namespace

int spawn_mpirun(int ep, const std::vector<std::string>& extra_mpirun_args, const std::string& rank0_pidfile) {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Containers often forbid the cross-process reads Open MPI's shared-memory transport uses for
  // large messages (CMA): copy through shared memory instead, which works everywhere.
  std::vector<std::string> args = {"mpirun",
                                   "-n",
                                   std::to_string(ep),
                                   "--oversubscribe",
                                   "--bind-to",
                                   "none",
                                   "--mca",
                                   "btl_vader_single_copy_mechanism",
                                   "none"};
  args.insert(args.end(), extra_mpirun_args.begin(), extra_mpirun_args.end());
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  args.push_back("/proc/self/exe");
  bool first = true;
  for (size_t i = 0; i < raw.size();) {
    const size_t end = raw.find('\0', i);
    if (!first) args.push_back(raw.substr(i, end - i));
    first = false;
    i = end == std::string::npos ? raw.size() : end + 1;
  }
  // The child's /proc/self/exe is mpirun's; pass our own binary's path instead.
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return report_error(io_error("cannot find this program's path to start mpirun"));
  self[n] = '\0';
  for (std::string& a : args)
    if (a == "/proc/self/exe") a = self;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (!rank0_pidfile.empty()) setenv("DEEPINFER_EP_RANK0_PIDFILE", rank0_pidfile.c_str(), 1);
  sigset_t forwarded, old;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGINT);
  sigaddset(&forwarded, SIGTERM);
  sigprocmask(SIG_BLOCK, &forwarded, &old);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return report_error(io_error("cannot start mpirun: fork failed"));
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &old, nullptr);
    execvp("mpirun", argv.data());
    std::fprintf(
        stderr,
        "deepinfer: --ep %d: cannot run mpirun (install openmpi-bin, or start deepinfer under "
        "mpirun -n %d yourself)\n",
        ep, ep);
    _exit(kExitRuntimeError);
  }
  return wait_forwarding(pid, rank0_pidfile, forwarded);
}

bool is_secondary_rank() {
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  return r && std::string(r) != "0";
}

Status check_ep_model(const EpFlags& f, const engine::LoadedModel& loaded) {
  // The DeepSeek-V3 and DeepSeek-V4 layouts have expert-parallel MoE layers.
  if (!loaded.model->supports_expert_parallel())
    return invalid_argument(
        "--ep {}: expert parallelism supports DeepSeek-V3- and V4-layout models, not '{}'", f.ep,
        loaded.model->config().architecture);
  return ep_placement(f, loaded.model->config()).status();
}

Result<std::unique_ptr<parallel::EpGroup>> join_ep(const EpFlags& f, engine::LoadedModel& loaded,
                                                   const EngineFlags& engine_flags) {
  DI_RETURN_IF_ERROR(check_ep_model(f, loaded));
  DI_ASSIGN_OR_RETURN(parallel::EpPlacement placement, ep_placement(f, loaded.model->config()));
  DI_ASSIGN_OR_RETURN(std::unique_ptr<parallel::EpGroup> group, parallel::EpGroup::init(f.ep));
  group->set_placement(std::move(placement));
  model::ForwardContext ctx;
  ctx.pool = &model::inline_pool();
  ctx.batch_invariant = engine_flags.batch_invariant;
  ctx.int8_activations = engine_flags.matmul_precision == "int8";
  DI_RETURN_IF_ERROR(loaded.model->set_expert_parallel(group.get(), ctx));
  return group;
}

}  // namespace deepinfer::tools
