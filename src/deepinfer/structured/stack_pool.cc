// Closure and byte advance over hash-consed stacks (see stack_pool.h).
#include "deepinfer/structured/stack_pool.h"

#include <algorithm>

namespace deepinfer::structured {

StackPool::StackPool(const Grammar* g) : g_(g) {
  nodes_.push_back({kNoPos, kNoPos});  // kAccept
  nodes_.push_back({kNoPos, kNoPos});  // kContext
  class_of_.assign(2, nullptr);
  mark_.resize(2, 0);
  closure_mark_.resize(2, 0);
  closed_begin_.resize(2, kNoPos);
  closed_end_.resize(2, kNoPos);
  next_.resize(2, kNoPos);
}

namespace {
size_t slot_of(uint64_t key, size_t mask) {
  key *= 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>(key ^ (key >> 32)) & mask;
}
}  // namespace

uint32_t StackPool::node(uint32_t parent, uint32_t pos) {
  const uint64_t key = (uint64_t{parent} << 32) | pos;
  if (index_ids_.size() < 2 * (nodes_.size() + 1)) {  // grow and re-place every node
    const size_t size = std::max<size_t>(256, index_ids_.size() * 2);
    index_keys_.assign(size, 0);
    index_ids_.assign(size, kNoPos);
    for (uint32_t id = 2; id < nodes_.size(); ++id) {
      const uint64_t k = (uint64_t{nodes_[id].parent} << 32) | nodes_[id].pos;
      size_t i = slot_of(k, size - 1);
      while (index_ids_[i] != kNoPos) i = (i + 1) & (size - 1);
      index_keys_[i] = k;
      index_ids_[i] = id;
    }
  }
  const size_t mask = index_ids_.size() - 1;
  size_t i = slot_of(key, mask);
  for (; index_ids_[i] != kNoPos; i = (i + 1) & mask)
    if (index_keys_[i] == key) return index_ids_[i];
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  index_keys_[i] = key;
  index_ids_[i] = id;
  nodes_.push_back({parent, pos});
  const Element& e = g_->elements[pos];
  class_of_.push_back(e.kind == ElemKind::kBytes ? &g_->byte_sets[e.arg] : nullptr);
  mark_.push_back(0);
  closure_mark_.push_back(0);
  closed_begin_.push_back(kNoPos);
  closed_end_.push_back(kNoPos);
  next_.push_back(kNoPos);
  return id;
}

void StackPool::begin_step() {
  if (++epoch_ == 0) {  // wrapped: clear marks so stale epochs cannot collide
    std::fill(mark_.begin(), mark_.end(), 0);
    epoch_ = 1;
  }
}

void StackPool::add_closed(uint32_t id, std::vector<uint32_t>& out) {
  if (closed_begin_[id] == kNoPos) {
    if (++closure_epoch_ == 0) {  // wrapped: clear marks so stale epochs cannot collide
      std::fill(closure_mark_.begin(), closure_mark_.end(), 0);
      closure_epoch_ = 1;
    }
    closure_tmp_.clear();
    closure(id, closure_tmp_);
    closed_begin_[id] = static_cast<uint32_t>(closed_items_.size());
    closed_items_.insert(closed_items_.end(), closure_tmp_.begin(), closure_tmp_.end());
    closed_end_[id] = static_cast<uint32_t>(closed_items_.size());
  }
  for (uint32_t i = closed_begin_[id]; i < closed_end_[id]; ++i) {
    const uint32_t x = closed_items_[i];
    if (mark_[x] == epoch_) continue;
    mark_[x] = epoch_;
    out.push_back(x);
  }
}

void StackPool::closure(uint32_t id, std::vector<uint32_t>& out) {
  if (closure_mark_[id] == closure_epoch_) return;
  closure_mark_[id] = closure_epoch_;
  if (id == kAccept || id == kContext) {
    out.push_back(id);
    return;
  }
  uint32_t p = nodes_[id].pos;
  const Element& e = g_->elements[p];
  switch (e.kind) {
    case ElemKind::kBytes:
      out.push_back(id);
      return;
    case ElemKind::kEndAlt: {
      uint32_t parent = nodes_[id].parent;
      if (parent == kAccept || parent == kContext) {
        closure(parent, out);
        return;
      }
      closure(node(nodes_[parent].parent, nodes_[parent].pos + 1), out);
      return;
    }
    case ElemKind::kRule: {
      // A call in tail position returns straight to our caller, so it replaces this frame.
      bool tail = g_->elements[p + 1].kind == ElemKind::kEndAlt;
      uint32_t base = tail ? nodes_[id].parent : id;
      const auto& alts = g_->rule_alts[e.arg];
      for (uint32_t a : alts) closure(node(base, a), out);
      return;
    }
  }
}

std::vector<uint32_t> StackPool::initial(uint32_t rule) {
  begin_step();
  std::vector<uint32_t> out;
  for (uint32_t a : g_->rule_alts[rule]) add_closed(node(kAccept, a), out);
  return out;
}

void StackPool::advance(const uint32_t* in, size_t n_in, uint8_t b, std::vector<uint32_t>& out) {
  out.clear();
  begin_step();
  for (size_t k = 0; k < n_in; ++k) {
    const uint32_t s = in[k];
    if (s == kAccept || s == kContext) continue;
    if (!class_of_[s]->test(b)) continue;
    // The stack past its byte class: looked up in the hash-consing index once, then kept.
    if (next_[s] == kNoPos) {
      const Node n = nodes_[s];
      const uint32_t next = node(n.parent, n.pos + 1);
      next_[s] = next;
    }
    add_closed(next_[s], out);
  }
}

bool StackPool::accepts(uint32_t s, const std::string& bytes) {
  tmp_a_.assign(1, s);
  for (char c : bytes) {
    advance(tmp_a_, static_cast<uint8_t>(c), tmp_b_);
    if (tmp_b_.empty()) return false;
    tmp_a_.swap(tmp_b_);
  }
  return true;
}

ByteSet StackPool::next_bytes(const uint32_t* stacks, size_t n) const {
  ByteSet u;
  for (size_t k = 0; k < n; ++k) {
    const uint32_t s = stacks[k];
    if (s == kAccept || s == kContext) continue;
    const ByteSet& b = g_->byte_sets[g_->elements[nodes_[s].pos].arg];
    for (int i = 0; i < 4; ++i) u.bits[i] |= b.bits[i];
  }
  return u;
}

}  // namespace deepinfer::structured
