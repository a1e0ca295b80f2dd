// Token mask from precomputed classes plus run-time checks of context-dependent tokens.
#include "deepinfer/structured/grammar_matcher.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "deepinfer/base/check.h"

namespace deepinfer::structured {

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

const TokenClasses* GrammarMatcher::find_classes_of(uint32_t stack, bool compute) {
  // Stacks are hash-consed, so a stack id names its context for the matcher's lifetime.
  if (stack >= classes_of_.size())
    classes_of_.resize(std::max<size_t>(pool_.size(), stack + 1), nullptr);
  if (classes_of_[stack]) return classes_of_[stack];
  // The shallowest key whose classification is not marked for refinement (see context_walker.h).
  if (const TokenClasses* c = cg_->cached_classes_for(cg_->key_of(pool_, stack, kContextFrames)))
    return classes_of_[stack] = c;
  if (!compute) return nullptr;
  for (int d = 1; d <= kContextFrames; ++d) {
    const ContextKey key = cg_->key_of(pool_, stack, d);
    const TokenClasses* c = &cg_->classes(key);
    if (!c->refine || d == kContextFrames) return classes_of_[stack] = c;
  }
  return nullptr;
}

void GrammarMatcher::fill_mask_by_key_set(const std::vector<uint32_t>& stacks, uint32_t* mask) {
  // Each stack cut to its key of kContextFrames frames (or to its end): sets of such keys come
  // back with other deeper stacks, and the grammar keeps one scan per set.
  key_set_.clear();
  for (uint32_t s : stacks)
    if (s != StackPool::kAccept) key_set_.push_back(cg_->key_of(pool_, s, kContextFrames));
  std::sort(key_set_.begin(), key_set_.end());
  key_set_.erase(std::unique(key_set_.begin(), key_set_.end()), key_set_.end());
  if (key_set_.empty()) return;
  std::shared_ptr<const TokenClasses> c = cg_->set_classes(key_set_);
  c->add_accepted(mask);
  if (!c->uncertain.empty()) check_uncertain(stacks, *c, mask);
}

void GrammarMatcher::check_uncertain(const std::vector<uint32_t>& stacks, const TokenClasses& c,
                                     uint32_t* mask) {
  // Tokens come in byte order with their common prefix with the previous one, so the states
  // after a shared prefix are reused: prefix_sets_[j] = stacks after j bytes of the last token
  // walked, valid up to `known`; `dead` marks the depth where that token died.
  const auto& tb = cg_->vocab().token_bytes;
  if (prefix_sets_.empty()) prefix_sets_.resize(1);
  prefix_sets_[0] = stacks;
  size_t known = 0, dead = SIZE_MAX, lcp = 0;
  for (size_t i = 0; i < c.uncertain.size(); ++i) {
    lcp = i == 0 ? 0 : std::min<size_t>(lcp, c.uncertain_lcp[i]);
    const int32_t id = c.uncertain[i];
    if ((mask[id >> 5] >> (id & 31)) & 1) continue;  // already allowed by another stack
    const std::string& t = tb[id];
    size_t from = std::min(lcp, known);
    lcp = SIZE_MAX;                                  // later tokens compare against this one
    if (dead != SIZE_MAX && from >= dead) continue;  // shares a prefix that already died
    if (prefix_sets_.size() < t.size() + 1) prefix_sets_.resize(t.size() + 1);
    dead = SIZE_MAX;
    size_t j = from;
    for (; j < t.size(); ++j) {
      pool_.advance(prefix_sets_[j], static_cast<uint8_t>(t[j]), prefix_sets_[j + 1]);
      if (prefix_sets_[j + 1].empty()) {
        dead = j + 1;
        break;
      }
    }
    known = dead == SIZE_MAX ? t.size() : dead;
    if (dead == SIZE_MAX) mask[id >> 5] |= 1u << (id & 31);
  }
}

void GrammarMatcher::fill_next_token_bitmask(uint32_t* mask) {
  const TokenVocabulary& v = cg_->vocab();
  const int words = v.mask_words();
  std::memset(mask, 0, sizeof(uint32_t) * words);
  if (terminated_.back()) return;
  const std::vector<uint32_t>* stacks = &history_.back();
  if (cg_->precompute_pending()) {
    // Ahead of the background precompute. A few missing contexts are classified here (and
    // kept for every later mask); when many are (a stack per optional property of an object,
    // say), one scan of the vocabulary for the set of their deepest keys costs less than
    // classifying each (a scan per key depth each); the grammar keeps it per key set. The
    // stacks whose contexts are classified already use them, as below.
    missing_.clear();
    known_.clear();
    for (uint32_t s : *stacks)
      (s != StackPool::kAccept && !find_classes_of(s, false) ? missing_ : known_).push_back(s);
    if (missing_.size() > kMaxContextsClassifiedPerMask) {
      fill_mask_by_key_set(missing_, mask);
      stacks = &known_;
    }
  }
  const auto& cur = *stacks;
  bool any_uncertain = false;
  for (uint32_t s : cur) {
    if (s == StackPool::kAccept) {
      for (int32_t id : v.eos_ids) mask[id >> 5] |= 1u << (id & 31);
      continue;
    }
    const TokenClasses& c = *find_classes_of(s, true);
    c.add_accepted(mask);
    any_uncertain |= !c.uncertain.empty();
  }
  if (!any_uncertain) return;
  for (uint32_t s : cur)
    if (s != StackPool::kAccept) {
      const TokenClasses& c = *find_classes_of(s, true);
      if (!c.uncertain.empty()) {
        one_stack_.assign(1, s);
        check_uncertain(one_stack_, c, mask);
      }
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

}  // namespace deepinfer::structured
