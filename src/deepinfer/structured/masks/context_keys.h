// The call structure a context key is grown along: byte positions in the order generation
// meets them (the shallowest keys), and which frames can sit below a frame of a given rule.
// The compile worker walks this to classify contexts ahead of time.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/structured/masks/context_walker.h"
#include "deepinfer/structured/grammar_ir.h"

namespace deepinfer::structured {

class ContextGraph {
 public:
  // key_pos: CompiledGrammar's position aliases ([elements], or empty for none).
  ContextGraph(const Grammar& g, const std::vector<uint32_t>& key_pos);

  // Byte-class positions, depth first from the root rule.
  const std::vector<uint32_t>& positions() const { return positions_; }
  // Frames that can sit directly below a frame at `pos`: the non-tail call sites of rules that
  // reach pos's rule through tail calls, plus kStackEnd when the root does.
  const std::vector<uint32_t>& frames_below(uint32_t pos);
  uint32_t rule_of(uint32_t pos) const { return rule_of_[pos]; }

 private:
  const Grammar& g_;
  const std::vector<uint32_t>& key_pos_;
  std::vector<uint32_t> positions_;
  std::vector<uint32_t> rule_of_;                     // [elements]
  std::vector<std::vector<uint32_t>> tail_callers_;  // [rules] rules that tail-call it
  std::vector<std::vector<uint32_t>> call_sites_;    // [rules] its non-tail call positions
  std::vector<std::vector<uint32_t>> below_;         // [rules] memo of frames_below
  std::vector<uint8_t> below_done_;                  // [rules]
  std::vector<uint32_t> mark_;                        // [rules] epoch of the last visit
  uint32_t epoch_ = 0;
};

}  // namespace deepinfer::structured
