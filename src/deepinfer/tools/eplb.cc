// `deepinfer eplb plan`: EPLB placements for a recorded expert load trace at EP sizes this
// machine cannot hold, with the slowest rank's load over the average with and without EPLB.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deepinfer/parallel/eplb_planner.h"
#include "deepinfer/parallel/expert_trace.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/subcommands.h"

namespace deepinfer::tools {
namespace {

struct EplbFlags {
  std::string trace;
  std::vector<int> ep;
  std::vector<int> redundant{0};
  int groups = 0;  // 0 = the trace's
  int nodes = 1;
  bool json = false;
};

std::string fmt_ratio(double v) { return v < 0 ? "n/a" : fmt::format("{:.3f}", v); }

int run_plan(const EplbFlags& f) {
  if (f.redundant.size() != 1 && f.redundant.size() != f.ep.size())
    return report_error(
        invalid_argument("--redundant: give one value, or one per --ep value ({} given for {})",
                         f.redundant.size(), f.ep.size()));
  auto trace = parallel::read_expert_trace(f.trace);
  if (!trace.is_ok()) return report_error(trace.status());
  std::vector<parallel::PlanResult> rows;
  for (size_t i = 0; i < f.ep.size(); ++i) {
    parallel::PlanRequest req{
        .ep = f.ep[i],
        .redundant = f.redundant.size() == 1 ? f.redundant[0] : f.redundant[i],
        .num_groups = f.groups > 0 ? f.groups : trace->num_groups,
        .num_nodes = f.nodes};
    auto r = parallel::plan_eplb(*trace, req);
    if (!r.is_ok()) return report_error(r.status());
    rows.push_back(*r);
  }
  if (f.json) {
    for (const auto& r : rows) {
      nlohmann::json j = {{"ep", r.ep},
                          {"physical_experts", r.num_physical},
                          {"static_max_over_mean", r.static_mean},
                          {"static_worst_layer", r.static_worst},
                          {"eplb_max_over_mean", r.eplb_mean},
                          {"eplb_worst_layer", r.eplb_worst},
                          {"static_windows", r.static_windows},
                          {"eplb_windows", r.eplb_windows}};
      std::printf("%s\n", j.dump().c_str());
    }
    return kExitOk;
  }
  std::printf("trace %s: %zu MoE layers, %d experts, %d groups, %zu windows of %d steps\n",
              f.trace.c_str(), trace->layers.size(), trace->num_experts, trace->num_groups,
              trace->windows.size(), trace->window_steps);
  std::printf("max rank load / mean rank load (mean over layers; worst layer in brackets)\n");
  std::printf("%6s %9s %18s %18s %14s %14s\n", "ep", "physical", "no EPLB", "EPLB",
              "no EPLB/window", "EPLB/window");
  for (const auto& r : rows) {
    std::printf("%6d %9d %9s [%6s] %9s [%6s] %14s %14s\n", r.ep, r.num_physical,
                fmt_ratio(r.static_mean).c_str(), fmt_ratio(r.static_worst).c_str(),
                fmt_ratio(r.eplb_mean).c_str(), fmt_ratio(r.eplb_worst).c_str(),
                fmt_ratio(r.static_windows).c_str(), fmt_ratio(r.eplb_windows).c_str());
  }
  return kExitOk;
}

}  // namespace

Subcommand make_eplb_command() {
  auto f = std::make_shared<EplbFlags>();
  auto chosen = std::make_shared<bool>(false);
  Subcommand s;
  s.add = [f, chosen](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("eplb", "Expert-parallel load balancing (EPLB) tools");
    cmd->require_subcommand(1);
    CLI::App* plan = cmd->add_subcommand("plan",
                                         "Place experts with EPLB for a recorded load trace and "
                                         "report the slowest rank's load over the average");
    plan->add_option("--trace", f->trace, "Expert load trace (JSON from `generate --expert-trace`)")
        ->required();
    plan->add_option("--ep", f->ep, "EP sizes (ranks), comma-separated, 1-1024")
        ->required()
        ->delimiter(',')
        ->check(CLI::Range(1, 1024));
    plan->add_option("--redundant", f->redundant,
                     "Redundant expert replicas beyond one per expert: one value, or one per --ep "
                     "(default 0)")
        ->delimiter(',')
        ->check(CLI::Range(0, 1 << 20));
    plan->add_option("--groups", f->groups, "Expert groups (default: the trace's n_group)")
        ->check(CLI::Range(1, 1 << 20));
    plan->add_option("--nodes", f->nodes,
                     "Hosts; groups stay on one host when they divide (default 1)")
        ->check(CLI::Range(1, 1 << 20));
    plan->add_flag("--json", f->json, "One JSON object per EP size");
    plan->footer(
        "Without EPLB: E/ep contiguous experts per rank (or each expert copied ep/E times). With "
        "EPLB: "
        "DeepSeek's algorithm (hierarchical when groups divide by nodes, else global) over E + "
        "redundant "
        "slots. See docs/parallel.md.");
    plan->callback([chosen] { *chosen = true; });
    return cmd;
  };
  s.run = [f, chosen] { return *chosen ? run_plan(*f) : kExitUsage; };
  return s;
}

}  // namespace deepinfer::tools
