// See closed_runs.h. A rule is closed over a set S when its alternatives take, between them,
// every byte of S into closed continuations, where a continuation is closed when it enters a
// closed rule (after byte classes that each hold all of S), by a tail call or not: a closed
// rule never ends on a run of S, so what follows its call never matters. An alternative that
// starts with a byte class B gives B's bytes of S when its continuation is closed; one that
// starts with a call gives the called rule's bytes, and, when the call returns to a closed
// continuation, the bytes of S the called rule takes in one byte and returns on (a character
// rule's ASCII alternative). Everything else gives nothing, which errs on the safe side. The
// grammar has no left recursion, so following calls at the start of alternatives reaches a
// byte class in finitely many steps, and the greatest fixpoint is sound.
#include "deepinfer/structured/masks/closed_runs.h"

#include "deepinfer/structured/masks/vocab_trie.h"

namespace deepinfer::structured {
namespace {

bool holds_all(const ByteSet& a, const ByteSet& s) {
  for (int w = 0; w < 4; ++w)
    if ((a.bits[w] & s.bits[w]) != s.bits[w]) return false;
  return true;
}

bool holds_range(const ByteSet& a, uint8_t lo, uint8_t hi) {
  for (int w = lo >> 6; w <= hi >> 6; ++w) {
    const int from = w == (lo >> 6) ? lo & 63 : 0, to = w == (hi >> 6) ? hi & 63 : 63;
    const uint64_t want =
        (to == 63 ? ~uint64_t{0} : (uint64_t{1} << (to + 1)) - 1) & ~((uint64_t{1} << from) - 1);
    if ((a.bits[w] & want) != want) return false;
  }
  return true;
}

constexpr uint8_t kAnyMultibyte = 0x80;  // kTextChars' stand-in bit for multi-byte characters

}  // namespace

ClosedRuns::ClosedRuns(const Grammar& g, const ByteSet& plain) : g_(g) {
  sets_[0].bytes = plain;
  sets_[1].bytes = plain;
  sets_[1].bytes.set_range(0x80, 0xFF);
  sets_[2].bytes = plain;
  sets_[2].bytes.set(kAnyMultibyte);
  sets_[2].by_characters = true;
}

int64_t ClosedRuns::continuation_rule(uint32_t q, const Set& set) const {
  for (;; ++q) {
    const Element& e = g_.elements[q];
    if (e.kind == ElemKind::kBytes) {
      // By characters, a class in between could split a character from what follows it.
      if (set.by_characters || !holds_all(g_.byte_sets[e.arg], set.bytes)) return kNoRule;
      continue;
    }
    return e.kind == ElemKind::kRule ? e.arg : kNoRule;
  }
}

ClosedRuns::AltDeps ClosedRuns::dependencies(uint32_t a, const Set& set) const {
  const Element& e = g_.elements[a];
  if (e.kind == ElemKind::kEndAlt) return {};
  if (e.kind == ElemKind::kBytes) return {kNoRule, continuation_rule(a + 1, set)};
  const bool tail = g_.elements[a + 1].kind == ElemKind::kEndAlt;
  return {e.arg, tail ? kNoRule : continuation_rule(a + 1, set)};
}

ByteSet ClosedRuns::multibyte_leads(uint32_t p) const {
  ByteSet leads;
  const Element& e0 = g_.elements[p];
  if (e0.kind != ElemKind::kBytes) return leads;
  const ByteSet& first = g_.byte_sets[e0.arg];
  // Lead bytes are C2-F4 (bits 2-52 of the last word): most classes hold none.
  constexpr uint64_t kLeadBits = ((uint64_t{1} << 51) - 1) << 2;
  if (!(first.bits[3] & kLeadBits)) return leads;
  for (const Utf8Form& f : kUtf8Forms) {
    bool whole = true;
    for (int i = 1; i < f.len && whole; ++i) {
      const Element& e = g_.elements[p + i];
      whole = e.kind == ElemKind::kBytes && holds_range(g_.byte_sets[e.arg], f.lo[i], f.hi[i]);
    }
    if (!whole || g_.elements[p + f.len].kind != ElemKind::kEndAlt) continue;
    for (int b = f.lo[0]; b <= f.hi[0]; ++b)
      if (first.test(static_cast<uint8_t>(b))) leads.set(static_cast<uint8_t>(b));
  }
  return leads;
}

bool ClosedRuns::every_lead(const ByteSet& leads) { return holds_range(leads, 0xC2, 0xF4); }

bool ClosedRuns::takes_every_multibyte_character(uint32_t r) {
  if (multibyte_.empty()) multibyte_.assign(g_.num_rules(), -1);
  if (multibyte_[r] < 0) {
    ByteSet leads;
    for (uint32_t a : g_.rule_alts[r]) {
      const ByteSet l = multibyte_leads(a);
      for (int w = 0; w < 4; ++w) leads.bits[w] |= l.bits[w];
    }
    multibyte_[r] = every_lead(leads);
  }
  return multibyte_[r];
}

ByteSet ClosedRuns::one_byte_returns(uint32_t r) const {
  ByteSet out;
  for (uint32_t a : g_.rule_alts[r])
    if (g_.elements[a].kind == ElemKind::kBytes && g_.elements[a + 1].kind == ElemKind::kEndAlt)
      for (int w = 0; w < 4; ++w) out.bits[w] |= g_.byte_sets[g_.elements[a].arg].bits[w];
  return out;
}

const ByteSet& ClosedRuns::gives(Set& set, uint32_t r) {
  if (set.slot.empty()) set.slot.assign(g_.num_rules(), -1);
  if (set.slot[r] >= 0) return set.gives[set.slot[r]];
  const ByteSet& s = set.bytes;
  // The rules not known yet that r depends on, directly or not; slot -2 - i while in
  // question (i = index into rules_). Each one's alternatives and what they depend on are
  // kept (deps_[dep_begin_[i], dep_end_[i])) for the passes below.
  rules_.clear();
  todo_.clear();
  deps_.clear();
  dep_begin_.clear();
  dep_end_.clear();
  auto ask = [&](uint32_t x) {
    set.slot[x] = -2 - static_cast<int32_t>(rules_.size());
    rules_.push_back(x);
    todo_.push_back(x);
    dep_begin_.push_back(0);
    dep_end_.push_back(0);
  };
  ask(r);
  while (!todo_.empty()) {
    const uint32_t x = todo_.back();
    todo_.pop_back();
    const int32_t i = -2 - set.slot[x];
    dep_begin_[i] = static_cast<uint32_t>(deps_.size());
    for (uint32_t a : g_.rule_alts[x]) {
      const AltDeps d = dependencies(a, set);
      deps_.push_back({a, d});
      for (int64_t y : {d.entered, d.then})
        if (y != kNoRule && set.slot[y] == -1) ask(static_cast<uint32_t>(y));
    }
    dep_end_[i] = static_cast<uint32_t>(deps_.size());
  }
  // Who uses each rule of the question, laid out by rule: users_[user_begin_[j], ...[j+1]).
  const size_t n = rules_.size();
  auto in_question = [&](int64_t y) { return y != kNoRule && set.slot[y] < -1; };
  user_begin_.assign(n + 1, 0);
  for (const auto& [a, d] : deps_)
    for (int64_t y : {d.entered, d.then})
      if (in_question(y)) ++user_begin_[-2 - set.slot[y] + 1];
  for (size_t j = 0; j < n; ++j) user_begin_[j + 1] += user_begin_[j];
  users_.resize(user_begin_[n]);
  fill_.assign(user_begin_.begin(), user_begin_.end() - 1);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t k = dep_begin_[i]; k < dep_end_[i]; ++k)
      for (int64_t y : {deps_[k].second.entered, deps_[k].second.then})
        if (in_question(y)) users_[fill_[-2 - set.slot[y]]++] = static_cast<uint32_t>(i);
  // From "every rule gives all of s" down: a rule whose bytes shrink sends the rules that
  // use it back to the work list (bytes only shrink, so each rule returns at most once per
  // byte of s, whatever cycles the rules form).
  local_.assign(n, s);
  auto current = [&](int64_t d) -> const ByteSet& {
    const int32_t slot = set.slot[d];
    return slot >= 0 ? set.gives[slot] : local_[-2 - slot];
  };
  queued_.assign(n, 1);
  todo_.clear();
  for (size_t i = 0; i < n; ++i) todo_.push_back(static_cast<uint32_t>(i));
  while (!todo_.empty()) {
    const uint32_t i = todo_.back();  // later-found rules first: what earlier ones depend on
    todo_.pop_back();
    queued_[i] = 0;
    ByteSet got;
    for (uint32_t k = dep_begin_[i]; k < dep_end_[i]; ++k) {
      const auto& [a, d] = deps_[k];
      if (d.entered != kNoRule) {
        const ByteSet& inner = current(d.entered);
        for (int w = 0; w < 4; ++w) got.bits[w] |= inner.bits[w];
      }
      if (d.then != kNoRule && holds_all(current(d.then), s)) {
        const Element& e = g_.elements[a];
        ByteSet taken = e.kind == ElemKind::kBytes ? g_.byte_sets[e.arg] : one_byte_returns(e.arg);
        if (set.by_characters) {  // single bytes count as plain ones only
          for (int w = 0; w < 4; ++w) taken.bits[w] &= sets_[0].bytes.bits[w];
          if (e.kind == ElemKind::kRule && takes_every_multibyte_character(e.arg))
            taken.set(kAnyMultibyte);
        }
        for (int w = 0; w < 4; ++w) got.bits[w] |= taken.bits[w] & s.bits[w];
      }
    }
    if (got == local_[i]) continue;
    local_[i] = got;
    for (uint32_t k = user_begin_[i]; k < user_begin_[i + 1]; ++k)
      if (!queued_[users_[k]]) {
        queued_[users_[k]] = 1;
        todo_.push_back(users_[k]);
      }
  }
  for (size_t i = 0; i < n; ++i) {
    set.slot[rules_[i]] = static_cast<int32_t>(set.gives.size());
    set.gives.push_back(local_[i]);
  }
  return set.gives[set.slot[r]];
}

uint8_t ClosedRuns::after(uint32_t p) { return continues(p + 1); }

uint8_t ClosedRuns::after_return(uint32_t call_site) { return continues(call_site + 1); }

uint8_t ClosedRuns::continues(uint32_t q) {
  uint8_t out = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t r = continuation_rule(q, sets_[i]);
    if (r != kNoRule && holds_all(gives(sets_[i], static_cast<uint32_t>(r)), sets_[i].bytes))
      out |= static_cast<uint8_t>(1 << i);
    // The text sets hold the plain bytes: a continuation that is not closed over those is
    // taken as closed over neither (no need to ask; a "no" is always safe).
    if (out == 0) break;
  }
  return out;
}

}  // namespace deepinfer::structured
