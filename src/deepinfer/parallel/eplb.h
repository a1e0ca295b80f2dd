// DeepSeek's expert-parallelism load balancer (EPLB): from per-expert load to a placement of
// physical expert slots (with redundant replicas of popular experts) on GPUs/ranks. Follows the
// published algorithm (github.com/deepseek-ai/EPLB, eplb.py) step for step, ties included, so its
// golden example gives exactly its published placement.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::parallel {

struct EplbOptions {
  int num_physical = 0;  // physical expert slots in all (logical experts + redundant replicas)
  int num_groups = 1;    // expert groups (DeepSeek-V3: n_group); 1 = no group structure
  int num_nodes = 1;     // hosts; groups are kept on one node when num_groups % num_nodes == 0
  int num_gpus = 1;      // ranks; a multiple of num_nodes, dividing num_physical
};

struct EplbPlacement {
  int num_layers = 0;
  int num_logical = 0;
  int num_physical = 0;
  int max_replicas = 0;           // the largest replica count of any expert
  std::vector<int32_t> phy2log;   // [num_layers, num_physical] logical expert of each slot
  std::vector<int32_t> phy_rank;  // [num_layers, num_physical] which replica of its expert
  std::vector<int32_t> log2phy;   // [num_layers, num_logical, max_replicas] slots, -1 padded
  std::vector<int32_t> logcnt;    // [num_layers, num_logical] replicas of each expert
};

// One row each. Pack n items with weights w into `packs` packs of exactly n / packs items,
// heaviest first, each into the lightest pack that still has room (lowest index on a tie).
void eplb_balanced_packing(const std::vector<float>& w, int packs, std::vector<int32_t>& pack_index,
                           std::vector<int32_t>& rank_in_pack);
// Give num_phy slots to w.size() experts: one each, then every extra slot to the expert with the
// largest load per replica (lowest index on a tie).
void eplb_replicate_experts(const std::vector<float>& w, int num_phy, std::vector<int32_t>& phy2log,
                            std::vector<int32_t>& rank, std::vector<int32_t>& logcnt);

// weight: [num_layers, num_logical] load of each logical expert (token counts). Hierarchical
// policy when num_groups % num_nodes == 0 (groups packed to nodes, replicas made within nodes,
// then packed to GPUs); otherwise the global policy (the same with one group and one node).
// Slot s of a layer lives on GPU s / (num_physical / num_gpus).
Result<EplbPlacement> eplb_rebalance(const std::vector<float>& weight, int num_layers,
                                     int num_logical, const EplbOptions& opt);

}  // namespace deepinfer::parallel
