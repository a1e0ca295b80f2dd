// What the ranks of `serve --ep N` exchange once per step (docs/parallel.md): rank 0 broadcasts a
// Control (new requests, each with the rank that runs it, cancellations, stop, a live rebalance
// step); every rank answers with a RankReport (which requests it accepted, its outputs, its load
// per expert, its staging state), gathered on rank 0. JSON, with the disaggregated deployment's request and output codec (pd_protocol.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/request.h"
#include "deepinfer/parallel/rebalancer.h"

namespace deepinfer::serve::ep {

struct Assignment {
  int64_t id = 0;  // the server's request id (rank 0 numbers them)
  int rank = 0;    // the rank whose engine runs it
  engine::GenerationRequest request;
};

struct Control {
  bool stop = false;
  std::vector<Assignment> add;
  std::vector<int64_t> abort;  // server request ids
  parallel::RebalanceAction rebalance = {};  // live EPLB: stage a placement, or switch to one
};

struct RankReport {
  std::vector<std::pair<int64_t, Status>> accepted;  // each assignment of this rank: ok or why not
  std::vector<engine::RequestOutput> outputs;        // request_id = the server's request id
  int running = 0, waiting = 0;
  int kv_blocks = 0, kv_blocks_in_use = 0;
  int64_t prefix_lookup_tokens = 0, prefix_hit_tokens = 0, steps = 0;
  uint64_t moe_rows = 0;  // (token, expert) rows this rank's experts computed, since start
  parallel::RankRebalanceReport rebalance = {};  // this step's rows per expert, staging state
};

std::string encode_control(const Control& c);
Result<Control> decode_control(const std::string& text);
std::string encode_report(const RankReport& r);
Result<RankReport> decode_report(const std::string& text);

}  // namespace deepinfer::serve::ep
