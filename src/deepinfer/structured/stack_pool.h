// Hash-consed parser stacks for the byte-level pushdown matcher: a stack is a node id, equal
// stacks get equal ids, so stack sets dedupe cheaply and history for rollback is just ids.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/structured/grammar_ir.h"

namespace deepinfer::structured {

class StackPool {
 public:
  static constexpr uint32_t kAccept = 0;   // empty stack: the root rule has finished
  static constexpr uint32_t kContext = 1;  // "the unknown rest of the stack" in precomputation
  static constexpr uint32_t kNoPos = 0xFFFFFFFFu;

  explicit StackPool(const Grammar* g);

  uint32_t node(uint32_t parent, uint32_t pos);
  uint32_t pos(uint32_t id) const { return nodes_[id].pos; }
  uint32_t parent(uint32_t id) const { return nodes_[id].parent; }
  size_t size() const { return nodes_.size(); }

  // Stacks whose top is a byte class (or kAccept) at the start of rule `rule`.
  std::vector<uint32_t> initial(uint32_t rule);
  // Consumes byte b from every stack in `in` (closed stacks, as initial() and advance()
  // return them: each top a byte class, or kAccept / kContext); `out` gets the deduplicated
  // closed results.
  void advance(const std::vector<uint32_t>& in, uint8_t b, std::vector<uint32_t>& out) {
    advance(in.data(), in.size(), b, out);
  }
  void advance(const uint32_t* in, size_t n, uint8_t b, std::vector<uint32_t>& out);
  // True when the bytes can be consumed from stack `s`; `scratch` buffers are reused.
  bool accepts(uint32_t s, const std::string& bytes);
  // The union of byte classes the stacks can consume next.
  ByteSet next_bytes(const std::vector<uint32_t>& stacks) const {
    return next_bytes(stacks.data(), stacks.size());
  }
  ByteSet next_bytes(const uint32_t* stacks, size_t n) const;

 private:
  struct Node {
    uint32_t parent;
    uint32_t pos;
  };
  void begin_step();
  // Appends the closed stacks id expands to (each once per closure_epoch_).
  void closure(uint32_t id, std::vector<uint32_t>& out);
  // Adds id's closure to `out`, skipping stacks already added this step. The closure of a
  // stack depends on the stack alone, so it is computed once and kept ([begin, end) of
  // closed_items_): sets that share stacks (every DFA state over them) reuse it.
  void add_closed(uint32_t id, std::vector<uint32_t>& out);

  const Grammar* g_;
  std::vector<Node> nodes_;
  // [nodes] the byte class a stack consumes next (its top's), null when its top is no byte
  // class (a stack not closed yet): advance tests it without going through its position.
  std::vector<const ByteSet*> class_of_;
  // Hash-consing index: open addressing over (parent, pos) keys, the node id in the slot's
  // value (kNoPos = free); a power of two in size, at most half full. No allocation per node.
  std::vector<uint64_t> index_keys_;
  std::vector<uint32_t> index_ids_;
  std::vector<uint32_t> mark_;  // [nodes] epoch of the last step that added the node
  uint32_t epoch_ = 0;
  std::vector<uint32_t> closure_mark_;  // [nodes] closure() visits, per closure_epoch_
  uint32_t closure_epoch_ = 0;
  std::vector<uint32_t> closed_begin_, closed_end_;  // [nodes] kNoPos = not computed yet
  std::vector<uint32_t> next_;  // [nodes] node(parent, pos + 1) once advanced, else kNoPos
  std::vector<uint32_t> closed_items_, closure_tmp_;
  std::vector<uint32_t> tmp_a_, tmp_b_;
};

}  // namespace deepinfer::structured
