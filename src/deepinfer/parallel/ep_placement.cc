// Expert placements for EpGroup: contiguous, or EPLB's for the traced layers.
#include <algorithm>

#include "deepinfer/parallel/ep_group.h"
#include "deepinfer/parallel/eplb.h"

namespace deepinfer::parallel {

Result<EpPlacement> contiguous_placement(int num_layers, int num_experts, int ranks) {
  if (ranks < 1 || num_experts % ranks != 0)
    return invalid_argument(
        "--ep {}: {} routed experts do not divide over {} ranks (without redundant experts "
        "the rank count must divide the experts)",
        ranks, num_experts, ranks);
  EpPlacement p;
  p.num_layers = num_layers;
  p.num_experts = p.num_physical = num_experts;
  p.ranks = ranks;
  p.max_replicas = 1;
  for (int l = 0; l < num_layers; ++l) {
    for (int e = 0; e < num_experts; ++e) {
      p.phy2log.push_back(e);
      p.log2phy.push_back(e);
      p.logcnt.push_back(1);
    }
  }
  return p;
}

Result<EpPlacement> placement_from_eplb(const EplbPlacement& e, const std::vector<int>& layers,
                                        int num_layers, int ranks) {
  if (e.num_physical % ranks != 0)
    return invalid_argument("--ep {} does not divide {} physical experts", ranks, e.num_physical);
  EpPlacement p;
  p.num_layers = num_layers;
  p.num_experts = e.num_logical;
  p.num_physical = e.num_physical;
  p.ranks = ranks;
  p.max_replicas = e.max_replicas;
  const int E = e.num_logical, P = e.num_physical, R = e.max_replicas;
  // Untraced layers: slots 0..E-1 hold the experts in order, the rest copy them round-robin.
  p.phy2log.resize(size_t(num_layers) * P);
  p.logcnt.assign(size_t(num_layers) * E, 0);
  p.log2phy.assign(size_t(num_layers) * E * R, -1);
  for (int l = 0; l < num_layers; ++l) {
    int row = -1;
    for (size_t i = 0; i < layers.size(); ++i)
      if (layers[i] == l) row = static_cast<int>(i);
    for (int s = 0; s < P; ++s) {
      const int ex = row >= 0 ? e.phy2log[size_t(row) * P + s] : s % E;
      const int rep = row >= 0 ? e.phy_rank[size_t(row) * P + s] : s / E;
      if (rep >= R) {  // an untraced layer with more copies than EPLB gave any expert: keep one
        p.phy2log[size_t(l) * P + s] = ex;
        continue;
      }
      p.phy2log[size_t(l) * P + s] = ex;
      p.log2phy[(size_t(l) * E + ex) * R + rep] = s;
      p.logcnt[size_t(l) * E + ex] = std::max(p.logcnt[size_t(l) * E + ex], rep + 1);
    }
  }
  return p;
}

}  // namespace deepinfer::parallel
