// Token mask from precomputed classes plus run-time checks of context-dependent tokens.
#include "deepinfer/engine/grammar/grammar_matcher.h"

#include <algorithm>
#include <cstring>

#include "deepinfer/base/check.h"

namespace deepinfer::engine::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : cg_(std::move(grammar)), pool_(&cg_->grammar()) {
  reset();
}

void GrammarMatcher::reset() {
  history_.clear();
  terminated_.clear();
  history_.push_back(pool_.initial(cg_->grammar().root));
  terminated_.push_back(false);
}

bool GrammarMatcher::can_terminate() const {
  const auto& cur = history_.back();
  return std::find(cur.begin(), cur.end(), StackPool::kAccept) != cur.end();
}

ContextKey GrammarMatcher::key_of(uint32_t stack) const {
  ContextKey key;
  key.fill(StackPool::kNoPos);
  uint32_t s = stack;
  for (int i = 0; i < kContextFrames && s != StackPool::kAccept; ++i) {
    key[i] = pool_.pos(s);
    s = pool_.parent(s);
  }
  return key;
}

void GrammarMatcher::fill_next_token_bitmask(uint32_t* mask) {
  const TokenVocabulary& v = cg_->vocab();
  const int words = v.mask_words();
  std::memset(mask, 0, sizeof(uint32_t) * words);
  if (terminated_.back()) return;
  const auto& cur = history_.back();
  std::vector<std::pair<uint32_t, const TokenClasses*>> per_stack;
  per_stack.reserve(cur.size());
  for (uint32_t s : cur) {
    if (s == StackPool::kAccept) {
      for (int32_t id : v.eos_ids) mask[id >> 5] |= 1u << (id & 31);
      continue;
    }
    const TokenClasses& c = cg_->classes(key_of(s));
    for (int w = 0; w < words; ++w) mask[w] |= c.accepted[w];
    per_stack.emplace_back(s, &c);
  }
  for (auto [s, c] : per_stack)
    for (int32_t id : c->uncertain) {
      if ((mask[id >> 5] >> (id & 31)) & 1) continue;
      if (pool_.accepts(s, v.token_bytes[id])) mask[id >> 5] |= 1u << (id & 31);
    }
}

bool GrammarMatcher::accept_bytes(const std::string& bytes) {
  if (terminated_.back()) return false;
  scratch_a_ = history_.back();
  for (char c : bytes) {
    pool_.advance(scratch_a_, static_cast<uint8_t>(c), scratch_b_);
    if (scratch_b_.empty()) return false;
    scratch_a_.swap(scratch_b_);
  }
  std::sort(scratch_a_.begin(), scratch_a_.end());
  history_.push_back(scratch_a_);
  terminated_.push_back(false);
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenVocabulary& v = cg_->vocab();
  if (id < 0 || id >= v.size() || terminated_.back()) return false;
  if (cg_->is_eos(id)) {
    if (!can_terminate()) return false;
    history_.push_back(history_.back());
    terminated_.push_back(true);
    return true;
  }
  if ((!v.is_special.empty() && v.is_special[id]) || v.token_bytes[id].empty()) return false;
  return accept_bytes(v.token_bytes[id]);
}

void GrammarMatcher::rollback(int n) {
  DI_CHECK(n >= 0 && n <= num_accepted(), "rollback({}) with {} accepted tokens", n,
           num_accepted());
  history_.resize(history_.size() - n);
  terminated_.resize(terminated_.size() - n);
}

std::string GrammarMatcher::find_jump_forward_string() {
  std::string out;
  if (terminated_.back()) return out;
  std::vector<uint32_t> cur = history_.back(), next;
  for (int i = 0; i < 1024; ++i) {
    if (std::find(cur.begin(), cur.end(), StackPool::kAccept) != cur.end()) break;
    ByteSet b = pool_.next_bytes(cur);
    if (b.count() != 1) break;
    int byte = 0;
    while (!b.test(static_cast<uint8_t>(byte))) ++byte;
    pool_.advance(cur, static_cast<uint8_t>(byte), next);
    if (next.empty()) break;
    out += static_cast<char>(byte);
    cur.swap(next);
  }
  return out;
}

}  // namespace deepinfer::engine::grammar
