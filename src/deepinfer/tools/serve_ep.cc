#include "deepinfer/tools/serve_ep.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "deepinfer/parallel/ep_liveness.h"
#include "deepinfer/serve/ep_backend.h"

namespace deepinfer::tools {
namespace {

// Every rank meets the same errors: rank 0 alone says so.
int fail(const Status& st) {
  if (!is_secondary_rank()) return report_error(st);
  return st.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntimeError;
}

// Rank 0's exit status, for a launcher that started mpirun (whose own status is 0 with
// --enable-recovery, however the ranks ended).
int tell_launcher(int status) {
  if (const char* pidfile = std::getenv("DEEPINFER_EP_RANK0_PIDFILE"))
    std::ofstream(std::string(pidfile) + ".status") << status << "\n";
  return status;
}

[[noreturn]] void exit_lost(const char* when) {
  tell_launcher(kExitRuntimeError);
  std::fprintf(stderr, "deepinfer serve: exiting with status 1 %s: an expert-parallel rank was lost\n", when);
  std::fflush(stderr);
  std::fflush(stdout);
  _exit(kExitRuntimeError);  // no MPI_Finalize: it would wait for the lost rank
}

// Rank 0 after a lost rank (EpLiveness's thread): fail the requests, stop the survivors, and
// exit once the grace period has let clients and load balancers see the 503s.
struct LostHandler {
  std::atomic<serve::EpBackend*> backend{nullptr};
  std::atomic<bool> lost{false};
  parallel::EpLiveness* liveness = nullptr;
  double grace_s = 10;

  void operator()(int rank, const std::string& why) {
    lost = true;
    if (serve::EpBackend* b = backend.load()) b->rank_lost(rank, why);
    std::fprintf(stderr, "deepinfer serve: expert-parallel rank %d %s; answering 503 for %.0f s, then exiting\n",
                 rank, why.c_str(), grace_s);
    if (liveness) liveness->abort_others();
    std::thread([s = grace_s] {
      std::this_thread::sleep_for(std::chrono::duration<double>(s));
      exit_lost("after the grace period");
    }).detach();
  }
};

int serve_rank0(std::unique_ptr<engine::Engine> engine, parallel::EpGroup& group, LostHandler& lost,
                serve::ServeOptions& server, const parallel::RebalanceOptions& rebalance) {
  auto backend = std::make_unique<serve::EpBackend>(std::move(engine), group, lost.liveness,
                                                    server.loop.max_queued_requests, rebalance);
  serve::EpBackend* b = backend.get();
  lost.backend = b;
  if (const char* pidfile = std::getenv("DEEPINFER_EP_RANK0_PIDFILE")) std::ofstream(pidfile) << getpid() << "\n";
  serve::RoleHooks hooks;
  hooks.ready = [b](std::string& why) { return b->ready(why); };
  hooks.extra_metrics = [b] { return b->extra_metrics(); };
  const Status st = serve::run_http_server(std::move(backend), server, nullptr, hooks);
  lost.backend = nullptr;
  if (lost.lost) exit_lost("after a stop signal");
  if (!st.is_ok()) return tell_launcher(report_error(st));
  return tell_launcher(kExitOk);
}

}  // namespace

void add_serve_ep_flags(CLI::App& app, ServeEpFlags& f) {
  add_ep_flags(app, f.ep);
  app.add_option("--ep-failure-grace", f.failure_grace_s,
                 "With --ep: after a rank is lost, seconds to answer 503 (and /health 503) before "
                 "exiting with status 1 (default 10)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--eplb-interval", f.ep.eplb_interval,
                 "With --ep: live EPLB every N busy engine steps (steps that ran MoE layers): place "
                 "experts from the last --eplb-window steps' load and move their weights while "
                 "serving; 0 = off (default 3000 with --redundant > 0, else 0)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--eplb-window", f.ep.eplb_window,
                 "With --ep: busy steps of per-expert load that live EPLB places from (default 1000)")
      ->check(CLI::Range(1, 1 << 20));
}

int run_serve_ep(EngineFlags& engine_flags, serve::ServeOptions& server, const ServeEpFlags& f) {
  if (engine_flags.overlap == "on") return report_error(invalid_argument("serve --ep needs --overlap off"));
  if (!engine_flags.speculative.empty())
    return report_error(unsupported("serve --ep with --speculative is not built yet (the drafter would have "
                                    "to step in lockstep too)"));
  const bool under_mpirun = parallel::EpGroup::launched_by_mpirun();
  auto loaded = load_model_for_cli(engine_flags.model);
  if (!loaded.is_ok()) return fail(loaded.status());
  if (!under_mpirun) {
    // Refuse what the ranks would refuse before starting them.
    Status st = check_ep_model(f.ep, *loaded);
    if (!st.is_ok()) return report_error(st);
    if (!parallel::EpGroup::available()) return report_error(parallel::EpGroup::init(f.ep.ep).status());
    const char* tmp = std::getenv("TMPDIR");
    const std::string pidfile = fmt::format("{}/deepinfer-ep-{}.pid", tmp ? tmp : "/tmp", getpid());
    return spawn_mpirun(f.ep.ep, {"--enable-recovery"}, pidfile);
  }
  if (server.served_model_name.empty()) server.served_model_name = loaded->name;
  auto joined = join_ep(f.ep, *loaded, engine_flags);
  if (!joined.is_ok()) return fail(joined.status());
  std::unique_ptr<parallel::EpGroup> group = std::move(joined).value();
  parallel::RebalanceOptions rebalance;
  rebalance.interval_steps = eplb_interval(f.ep);
  rebalance.window_steps = f.ep.eplb_window;
  rebalance.num_groups = std::max(loaded->model->config().n_group, 1);
  auto eng = make_engine(*loaded, engine_flags);  // takes the model
  if (!group->all(eng.is_ok()))
    return fail(eng.is_ok() ? Status(StatusCode::kInternal, "another expert-parallel rank could not start its engine") : eng.status());
  LostHandler lost;
  lost.grace_s = f.failure_grace_s;
  auto liveness = parallel::EpLiveness::connect(*group, std::ref(lost));
  if (!liveness.is_ok()) return fail(liveness.status());
  lost.liveness = liveness->get();
  if (group->rank() == 0) return serve_rank0(std::move(eng).value(), *group, lost, server, rebalance);
  // The other ranks stop when rank 0 says so (a signal from mpirun reaches rank 0 too).
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  serve::ep::EpRank rank(**eng, *group);
  parallel::EpLiveness* l = liveness->get();
  rank.set_on_stop([l] { l->set_stopping(); });  // before rank 0 may close its end
  rank.run();
  return kExitOk;
}

}  // namespace deepinfer::tools
