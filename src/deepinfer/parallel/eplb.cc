// EPLB (see eplb.h). Arithmetic is float32 like the reference (torch float tensors), and every
// tie breaks as it does there: the sort is stable (equal loads keep their index order), Python's
// min() and torch's max() pick the first of equal candidates.
#include "deepinfer/parallel/eplb.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace deepinfer::parallel {

void eplb_balanced_packing(const std::vector<float>& w, int packs, std::vector<int32_t>& pack_index,
                           std::vector<int32_t>& rank_in_pack) {
  const int n = static_cast<int>(w.size());
  const int per_pack = n / packs;
  pack_index.assign(n, -1);
  rank_in_pack.assign(n, -1);
  if (per_pack == 1) {
    std::iota(pack_index.begin(), pack_index.end(), 0);
    std::fill(rank_in_pack.begin(), rank_in_pack.end(), 0);
    return;
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return w[a] > w[b]; });
  std::vector<float> pack_w(packs, 0.0f);
  std::vector<int> pack_items(packs, 0);
  for (int32_t item : order) {
    int best = -1;
    for (int p = 0; p < packs; ++p) {
      if (pack_items[p] < per_pack && (best < 0 || pack_w[p] < pack_w[best])) best = p;
    }
    pack_index[item] = best;
    rank_in_pack[item] = pack_items[best];
    pack_w[best] += w[item];
    pack_items[best] += 1;
  }
}

void eplb_replicate_experts(const std::vector<float>& w, int num_phy, std::vector<int32_t>& phy2log,
                            std::vector<int32_t>& rank, std::vector<int32_t>& logcnt) {
  const int num_log = static_cast<int>(w.size());
  phy2log.resize(num_phy);
  rank.assign(num_phy, 0);
  logcnt.assign(num_log, 1);
  std::iota(phy2log.begin(), phy2log.begin() + num_log, 0);
  for (int i = num_log; i < num_phy; ++i) {
    int best = 0;
    float best_load = w[0] / static_cast<float>(logcnt[0]);
    for (int j = 1; j < num_log; ++j) {
      const float load = w[j] / static_cast<float>(logcnt[j]);
      if (load > best_load) best = j, best_load = load;
    }
    phy2log[i] = best;
    rank[i] = logcnt[best];
    logcnt[best] += 1;
  }
}

namespace {

std::vector<int32_t> inverse(const std::vector<int32_t>& perm) {
  std::vector<int32_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int32_t>(i);
  return inv;
}

// One layer of the hierarchical policy. w: [num_logical]; writes [num_physical] slots and
// [num_logical] counts.
void rebalance_layer(const float* w, int num_logical, const EplbOptions& o, int32_t* out_phy2log,
                     int32_t* out_rank, int32_t* out_logcnt) {
  const int group_size = num_logical / o.num_groups;
  const int groups_per_node = o.num_groups / o.num_nodes;
  const int log_per_node = num_logical / o.num_nodes;
  const int phy_per_node = o.num_physical / o.num_nodes;
  const int phy_per_gpu = o.num_physical / o.num_gpus;
  const int gpus_per_node = o.num_gpus / o.num_nodes;

  // Step 1: pack groups to nodes; mlog = the expert's index once groups are laid out node by node.
  std::vector<float> group_w(o.num_groups, 0.0f);
  for (int g = 0; g < o.num_groups; ++g)
    for (int k = 0; k < group_size; ++k) group_w[g] += w[g * group_size + k];
  std::vector<int32_t> group_pack, group_rank;
  eplb_balanced_packing(group_w, o.num_nodes, group_pack, group_rank);
  std::vector<int32_t> log2mlog(num_logical);
  for (int e = 0; e < num_logical; ++e) {
    const int g = e / group_size;
    log2mlog[e] = (group_pack[g] * groups_per_node + group_rank[g]) * group_size + e % group_size;
  }
  const std::vector<int32_t> mlog2log = inverse(log2mlog);

  std::vector<int32_t> mlogcnt_all(num_logical);
  for (int node = 0; node < o.num_nodes; ++node) {
    // Step 2: replicas within the node.
    std::vector<float> node_w(log_per_node);
    for (int m = 0; m < log_per_node; ++m) node_w[m] = w[mlog2log[node * log_per_node + m]];
    std::vector<int32_t> phy2mlog, phyrank, mlogcnt;
    eplb_replicate_experts(node_w, phy_per_node, phy2mlog, phyrank, mlogcnt);
    std::copy(mlogcnt.begin(), mlogcnt.end(), mlogcnt_all.begin() + node * log_per_node);

    // Step 3: pack the node's physical experts to its GPUs.
    std::vector<float> phy_w(phy_per_node);
    for (int p = 0; p < phy_per_node; ++p)
      phy_w[p] = node_w[phy2mlog[p]] / static_cast<float>(mlogcnt[phy2mlog[p]]);
    std::vector<int32_t> pack, rank_in_pack;
    eplb_balanced_packing(phy_w, gpus_per_node, pack, rank_in_pack);
    std::vector<int32_t> phy2pphy(phy_per_node);
    for (int p = 0; p < phy_per_node; ++p) phy2pphy[p] = pack[p] * phy_per_gpu + rank_in_pack[p];
    const std::vector<int32_t> pphy2phy = inverse(phy2pphy);
    for (int q = 0; q < phy_per_node; ++q) {
      const int mlog = phy2mlog[pphy2phy[q]] + node * log_per_node;
      out_phy2log[node * phy_per_node + q] = mlog2log[mlog];
      out_rank[node * phy_per_node + q] = phyrank[pphy2phy[q]];
    }
  }
  for (int e = 0; e < num_logical; ++e) out_logcnt[e] = mlogcnt_all[log2mlog[e]];
}

Status check_options(const std::vector<float>& weight, int num_layers, int num_logical,
                     const EplbOptions& o) {
  if (num_layers <= 0 || num_logical <= 0) return invalid_argument("eplb: no layers or no experts");
  if (weight.size() != size_t(num_layers) * num_logical)
    return invalid_argument("eplb: weight has {} values, want {} layers x {} experts",
                            weight.size(), num_layers, num_logical);
  for (float v : weight)
    if (!std::isfinite(v) || v < 0)
      return invalid_argument("eplb: expert loads must be finite and >= 0");
  if (o.num_groups <= 0 || o.num_nodes <= 0 || o.num_gpus <= 0)
    return invalid_argument("eplb: groups, nodes and gpus must be positive");
  if (num_logical % o.num_groups != 0)
    return invalid_argument("eplb: {} groups do not divide {} experts", o.num_groups, num_logical);
  if (o.num_physical < num_logical)
    return invalid_argument("eplb: {} physical slots cannot hold {} experts", o.num_physical,
                            num_logical);
  if (o.num_gpus % o.num_nodes != 0)
    return invalid_argument("eplb: {} nodes do not divide {} gpus", o.num_nodes, o.num_gpus);
  if (o.num_physical % o.num_gpus != 0)
    return invalid_argument("eplb: {} ranks do not divide {} physical experts", o.num_gpus,
                            o.num_physical);
  return Status::ok();
}

}  // namespace

Result<EplbPlacement> eplb_rebalance(const std::vector<float>& weight, int num_layers,
                                     int num_logical, const EplbOptions& opt) {
  DI_RETURN_IF_ERROR(check_options(weight, num_layers, num_logical, opt));
  EplbOptions o = opt;
  if (o.num_groups % o.num_nodes != 0) o.num_groups = 1, o.num_nodes = 1;  // the global policy
  if (num_logical % o.num_nodes != 0)
    return invalid_argument("eplb: {} nodes do not divide {} experts", o.num_nodes, num_logical);
  EplbPlacement p;
  p.num_layers = num_layers;
  p.num_logical = num_logical;
  p.num_physical = o.num_physical;
  p.phy2log.resize(size_t(num_layers) * o.num_physical);
  p.phy_rank.resize(p.phy2log.size());
  p.logcnt.resize(size_t(num_layers) * num_logical);
  for (int l = 0; l < num_layers; ++l) {
    rebalance_layer(weight.data() + size_t(l) * num_logical, num_logical, o,
                    p.phy2log.data() + size_t(l) * o.num_physical,
                    p.phy_rank.data() + size_t(l) * o.num_physical,
                    p.logcnt.data() + size_t(l) * num_logical);
  }
  p.max_replicas = *std::max_element(p.logcnt.begin(), p.logcnt.end());
  p.log2phy.assign(size_t(num_layers) * num_logical * p.max_replicas, -1);
  for (int l = 0; l < num_layers; ++l) {
    for (int s = 0; s < o.num_physical; ++s) {
      const size_t i = size_t(l) * o.num_physical + s;
      p.log2phy[(size_t(l) * num_logical + p.phy2log[i]) * p.max_replicas + p.phy_rank[i]] = s;
    }
  }
  return p;
}

}  // namespace deepinfer::parallel
