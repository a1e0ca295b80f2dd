// Expert placements for EpGroup: contiguous, EPLB's for the traced layers, or rebuilt from a
// broadcast slot table; and the per-expert row counts a rank keeps for live rebalancing.
#include <algorithm>
#include <set>

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

Result<EpPlacement> placement_from_phy2log(std::vector<int32_t> phy2log, int num_layers,
                                           int num_experts, int num_physical, int ranks) {
  if (num_layers < 1 || num_experts < 1 || num_physical < num_experts || ranks < 1 ||
      num_physical % ranks != 0 || phy2log.size() != size_t(num_layers) * size_t(num_physical))
    return invalid_argument(
        "expert placement: {} slots for {} layers x {} physical experts over {} ranks do not fit",
        phy2log.size(), num_layers, num_physical, ranks);
  EpPlacement p;
  p.num_layers = num_layers;
  p.num_experts = num_experts;
  p.num_physical = num_physical;
  p.ranks = ranks;
  p.logcnt.assign(size_t(num_layers) * num_experts, 0);
  for (int l = 0; l < num_layers; ++l) {
    for (int s = 0; s < num_physical; ++s) {
      const int32_t e = phy2log[size_t(l) * num_physical + s];
      if (e < 0 || e >= num_experts)
        return invalid_argument("expert placement: slot {} of layer {} holds expert {} (of {})", s,
                                l, e, num_experts);
      p.max_replicas = std::max(p.max_replicas, ++p.logcnt[size_t(l) * num_experts + e]);
    }
    for (int e = 0; e < num_experts; ++e)
      if (p.logcnt[size_t(l) * num_experts + e] == 0)
        return invalid_argument("expert placement: expert {} of layer {} has no slot", e, l);
  }
  p.log2phy.assign(size_t(num_layers) * num_experts * p.max_replicas, -1);
  std::vector<int> seen(static_cast<size_t>(num_experts));
  for (int l = 0; l < num_layers; ++l) {
    std::fill(seen.begin(), seen.end(), 0);
    for (int s = 0; s < num_physical; ++s) {
      const int32_t e = phy2log[size_t(l) * num_physical + s];
      p.log2phy[(size_t(l) * num_experts + e) * p.max_replicas + seen[size_t(e)]++] = s;
    }
  }
  p.phy2log = std::move(phy2log);
  return p;
}

std::vector<int> experts_on_rank(const EpPlacement& p, int layer, int rank) {
  const int per = p.slots_per_rank();
  std::set<int> held;
  for (int s = rank * per; s < (rank + 1) * per; ++s)
    held.insert(p.phy2log[size_t(layer) * p.num_physical + s]);
  return {held.begin(), held.end()};
}

void EpGroup::count_rows(int layer, const int32_t* slots, int64_t n) {
  rows_computed_ += uint64_t(n);
  const size_t base = size_t(layer) * placement_.num_physical;
  for (int64_t i = 0; i < n; ++i)
    ++expert_rows_[size_t(layer) * placement_.num_experts + placement_.phy2log[base + slots[i]]];
}

SparseExpertRows EpGroup::take_expert_rows() {
  SparseExpertRows out;
  for (size_t i = 0; i < expert_rows_.size(); ++i) {
    if (expert_rows_[i] == 0) continue;
    out.emplace_back(uint32_t(i), uint32_t(expert_rows_[i]));
    expert_rows_[i] = 0;
  }
  return out;
}

}  // namespace deepinfer::parallel
