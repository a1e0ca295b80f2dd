// See context_keys.h. Tail calls replace their frame (StackPool::closure), so the frame below
// a rule's frame is a non-tail call site of it or of any rule that tail-calls into it.
#include "deepinfer/structured/masks/context_keys.h"

#include "deepinfer/structured/stack_pool.h"

namespace deepinfer::structured {

ContextGraph::ContextGraph(const Grammar& g, const std::vector<uint32_t>& key_pos)
    : g_(g), key_pos_(key_pos) {
  const size_t n = g.num_rules();
  rule_of_.assign(g.elements.size(), 0);
  tail_callers_.resize(n);
  call_sites_.resize(n);
  below_.resize(n);
  below_done_.assign(n, 0);
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t a : g.rule_alts[r])
      for (uint32_t p = a; g.elements[p].kind != ElemKind::kEndAlt; ++p) {
        rule_of_[p] = r;
        const Element& e = g.elements[p];
        if (e.kind != ElemKind::kRule) continue;
        if (g.elements[p + 1].kind == ElemKind::kEndAlt) tail_callers_[e.arg].push_back(r);
        else call_sites_[e.arg].push_back(p);
      }
  // Depth-first from the root: a rule's positions are listed when it is first called.
  std::vector<uint8_t> seen(n, 0);
  std::vector<std::pair<uint32_t, uint32_t>> stack;  // (rule, index into its flattened positions)
  std::vector<std::vector<uint32_t>> body(n);
  auto enter = [&](uint32_t r) {
    if (seen[r]) return;
    seen[r] = 1;
    for (uint32_t a : g.rule_alts[r])
      for (uint32_t p = a; g.elements[p].kind != ElemKind::kEndAlt; ++p) body[r].push_back(p);
    stack.emplace_back(r, 0);
  };
  enter(g.root);
  while (!stack.empty()) {
    auto& [r, i] = stack.back();
    if (i >= body[r].size()) {
      body[r] = {};
      stack.pop_back();
      continue;
    }
    uint32_t p = body[r][i++];
    const Element& e = g.elements[p];
    if (e.kind == ElemKind::kBytes) {
      if (key_pos_.empty() || key_pos_[p] == p) positions_.push_back(p);  // aliases share a key
    }
    else enter(e.arg);  // may grow `stack`; r and i are not used after this
  }
}

const std::vector<uint32_t>& ContextGraph::frames_below(uint32_t pos) {
  const uint32_t rule = rule_of_[pos];
  if (below_done_[rule]) return below_[rule];
  // Rules reaching `rule` through chains of tail calls (including itself).
  if (mark_.empty()) mark_.assign(g_.num_rules(), 0);
  ++epoch_;
  std::vector<uint32_t> todo = {rule};
  mark_[rule] = epoch_;
  auto& out = below_[rule];
  while (!todo.empty()) {
    uint32_t r = todo.back();
    todo.pop_back();
    if (r == g_.root) out.push_back(kStackEnd);
    for (uint32_t site : call_sites_[r]) {
      uint32_t k = key_pos_.empty() ? site : key_pos_[site];
      if (k == site) out.push_back(k);  // an aliased site's key is its canonical site's
    }
    for (uint32_t c : tail_callers_[r])
      if (mark_[c] != epoch_) { mark_[c] = epoch_; todo.push_back(c); }
  }
  below_done_[rule] = 1;
  return out;
}

}  // namespace deepinfer::structured
