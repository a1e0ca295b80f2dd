#include "deepinfer/serve/ep_rebalance_metrics.h"

#include <fmt/format.h>

namespace deepinfer::serve::ep {

std::string render_rebalance_metrics(const parallel::RebalanceStats& s, double window_imbalance,
                                     int window_steps) {
  std::string out;
  auto line = [&out](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  line("deepinfer_ep_rebalances_total", "counter", "Live EPLB placement switches", s.rebalances);
  line("deepinfer_ep_rebalance_failures_total", "counter",
       "Rebalances dropped because a rank could not stage them", s.failed);
  line("deepinfer_ep_placement_epoch", "gauge",
       "The expert placement in use (0 = the one at start)", s.epoch);
  line("deepinfer_ep_rebalance_experts_loaded_total", "counter",
       "Expert weights (per rank and layer) read from the checkpoint by rebalances",
       s.experts_loaded);
  line("deepinfer_ep_rebalance_last_seconds", "gauge",
       "Last rebalance: seconds from its proposal to the switch (staging on every rank)",
       fmt::format("{:.6f}", s.last_switch_seconds));
  line("deepinfer_ep_moe_layer_imbalance", "gauge",
       "Busiest rank's MoE rows over the mean per MoE layer, averaged over layers, over the load "
       "window since the "
       "last switch (1 = even; 0 = no data)",
       fmt::format("{:.6f}", window_imbalance));
  line("deepinfer_ep_load_window_steps", "gauge", "Busy steps in the per-expert load window",
       window_steps);
  line("deepinfer_ep_moe_layer_imbalance_before_rebalance", "gauge",
       "deepinfer_ep_moe_layer_imbalance of the window just before the last switch (0 = none yet)",
       fmt::format("{:.6f}", s.imbalance_before));
  line("deepinfer_ep_load_window_steps_before_rebalance", "gauge",
       "Busy steps in the window before the last switch", s.window_steps_before);
  line("deepinfer_ep_moe_layer_imbalance_planned", "gauge",
       "EPLB's modelled imbalance of the last switch's placement on that window (0 = none yet)",
       fmt::format("{:.6f}", s.imbalance_planned));
  return out;
}

}  // namespace deepinfer::serve::ep
