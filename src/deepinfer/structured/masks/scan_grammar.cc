// See scan_grammar.h.
#include "deepinfer/structured/masks/scan_grammar.h"

#include <vector>

namespace deepinfer::structured {

std::unique_ptr<Grammar> loop_long_chains(const Grammar& g, size_t max_len) {
  const size_t a = max_len + 1;
  std::vector<uint32_t> redirect;  // [rules] the rule a call goes to instead (itself if none)
  std::unique_ptr<Grammar> out;
  for (const auto& chain : g.counted_chains) {
    if (chain.size() <= a + 1) continue;
    const uint32_t top = chain[a];
    const bool optional = g.rule_alts[top].size() == 2;
    if (!optional) {
      // A required copy's body: alt 0 less its trailing call of the next link (a rule the
      // grammar does not mark counts as nullable: no loop then).
      bool body_nullable = true;
      for (uint32_t p = g.rule_alts[top][0]; body_nullable; ++p) {
        const Element& e = g.elements[p];
        if (e.kind == ElemKind::kEndAlt) break;
        const bool last = g.elements[p + 1].kind == ElemKind::kEndAlt;
        if (!last) body_nullable = e.kind == ElemKind::kRule && (e.arg >= g.nullable.size() || g.nullable[e.arg]);
      }
      if (body_nullable) continue;
    }
    if (!out) {
      out = std::make_unique<Grammar>(g);
      redirect.resize(g.num_rules());
      for (uint32_t r = 0; r < redirect.size(); ++r) redirect[r] = r;
    }
    for (size_t i = a + 1; i < chain.size(); ++i) redirect[chain[i]] = top;
    // Link A's body ends with its call of link A - 1 (in tail position).
    uint32_t p = g.rule_alts[top][0];
    while (g.elements[p + 1].kind != ElemKind::kEndAlt) ++p;
    if (g.elements[p].kind == ElemKind::kRule && g.elements[p].arg == chain[a - 1])
      out->elements[p].arg = top;
  }
  if (!out) return nullptr;
  for (Element& e : out->elements)
    if (e.kind == ElemKind::kRule) e.arg = redirect[e.arg];
  return out;
}

}  // namespace deepinfer::structured
