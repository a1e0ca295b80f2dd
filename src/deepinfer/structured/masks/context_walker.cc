// Vocabulary classification for one context (see context_walker.h): a linear scan of the
// preorder trie over a lazily built DFA of stack sets; a dead prefix skips its subtree. What a
// state does over runs of bytes (whole subtrees accepted unvisited) is in
// context_walker_runs.cc.
#include "deepinfer/structured/masks/context_walker.h"

#include <algorithm>
#include <set>

#include "deepinfer/base/check.h"

namespace deepinfer::structured {

int key_depth(const ContextKey& k) {
  int d = 0;
  while (d < kContextFrames && k[d] != StackPool::kNoPos) ++d;
  return d;
}

bool key_is_final(const ContextKey& k) {
  int d = key_depth(k);
  return d == kContextFrames || (d > 0 && k[d - 1] == kStackEnd);
}

ContextKey shallower_key(ContextKey k) {
  k[key_depth(k) - 1] = StackPool::kNoPos;
  return k;
}

void TokenClasses::add_accepted(uint32_t* mask) const {
  if (base) base->add_accepted(mask);
  if (!accepted_bits.empty()) {
    const size_t n = accepted_bits.size();
    const uint32_t* a = accepted_bits.data();
    for (size_t w = 0; w < n; ++w) mask[w] |= a[w];
    return;
  }
  for (int32_t id : accepted_ids) mask[id >> 5] |= 1u << (id & 31);
}

size_t TokenClasses::memory_bytes() const {
  return sizeof(*this) + accepted_bits.size() * 4 + accepted_ids.size() * 4 + uncertain.size() * 6;
}

namespace {

uint64_t hash_set(const std::vector<uint32_t>& v) {
  uint64_t h = v.size();
  for (uint32_t x : v) h = (h ^ x) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

}  // namespace

ByteColumns byte_columns(const Grammar& g) {
  // Partition refinement: each distinct byte class splits every column into the bytes it
  // contains and the rest; columns are numbered in order of their smallest byte.
  std::array<uint16_t, 256> col{};
  int num = 1;
  std::set<std::array<uint64_t, 4>> seen;
  std::array<int, 512> remap;
  for (const ByteSet& set : g.byte_sets) {
    if (num == 256) break;
    if (!seen.insert(set.bits).second) continue;
    remap.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      int k = col[b] * 2 + set.test(static_cast<uint8_t>(b));
      if (remap[k] < 0) remap[k] = next++;
      col[b] = static_cast<uint16_t>(remap[k]);
    }
    num = next;
  }
  ByteColumns out;
  for (int b = 0; b < 256; ++b) out.col[b] = static_cast<uint8_t>(col[b]);
  out.num = num;
  return out;
}

ContextWalker::ContextWalker(const Grammar* g, std::shared_ptr<const VocabTrie> trie,
                             const ByteColumns& cols)
    : g_(g),
      trie_(std::move(trie)),
      byte_col_(cols.col),
      num_cols_(cols.num),
      runs_(*g_, ByteSet{trie_->plain}) {
  state_at_.resize(trie_->max_len + 2);
  esc_at_.resize(trie_->max_len + 2);
  for (int b = 0; b < 256; ++b) col_bytes_[byte_col_[b]][b >> 6] |= uint64_t{1} << (b & 63);
  build_utf8_paths();
  std::array<bool, 256> seen_col{};
  for (int b = 0; b < 256; ++b)
    if (((trie_->plain[b >> 6] >> (b & 63)) & 1) && !seen_col[byte_col_[b]]) {
      seen_col[byte_col_[b]] = true;
      plain_cols_.push_back({byte_col_[b], static_cast<uint8_t>(b)});
    }
}

int32_t ContextWalker::intern(std::vector<uint32_t>& v) {
  std::sort(v.begin(), v.end());
  const uint64_t h = hash_set(v);
  const size_t num_sets = set_hash_.size();
  if (set_index_.size() < 2 * (num_sets + 1)) {  // grow and re-place every set
    set_index_.assign(std::max<size_t>(64, set_index_.size() * 2), -1);
    for (size_t s = 0; s < num_sets; ++s) {
      size_t i = set_hash_[s] & (set_index_.size() - 1);
      while (set_index_[i] >= 0) i = (i + 1) & (set_index_.size() - 1);
      set_index_[i] = static_cast<int32_t>(s);
    }
  }
  const size_t mask = set_index_.size() - 1;
  size_t i = h & mask;
  for (; set_index_[i] >= 0; i = (i + 1) & mask) {
    const int32_t s = set_index_[i];
    if (set_hash_[s] == h && set_size(s) == v.size() &&
        std::equal(v.begin(), v.end(), set_items_.begin() + set_begin_[s]))
      return s;
  }
  const int32_t id = static_cast<int32_t>(num_sets);
  set_index_[i] = id;
  set_hash_.push_back(h);
  set_items_.insert(set_items_.end(), v.begin(), v.end());
  set_begin_.push_back(static_cast<uint32_t>(set_items_.size()));
  has_ctx_.push_back(std::find(v.begin(), v.end(), StackPool::kContext) != v.end());
  set_elems_ += v.size();
  trans_.resize(trans_.size() + num_cols_, -1);
  loop_yes_.push_back({});
  loop_no_.push_back({});
  plain_run_.push_back(-1);
  plain_uniform_.push_back(-1);
  text_safe_.push_back(-1);
  closed_.push_back(-1);
  succ_.push_back(-1);
  succ_yes_.push_back({});
  succ_no_.push_back({});
  next_bytes_.push_back(pool_->next_bytes(v.data(), v.size()));
  return id;
}

int32_t ContextWalker::step(int32_t from, uint8_t byte) {
  size_t cell = static_cast<size_t>(from) * num_cols_ + byte_col_[byte];
  if (trans_[cell] >= 0) return trans_[cell];
  // A byte no stack of the set consumes (nor any byte of its column) dies without a step.
  if (!next_bytes_[from].test(byte)) return trans_[cell] = kEmptySet;
  pool_->advance(set_items_.data() + set_begin_[from], set_size(from), byte, scratch_);
  int32_t to = intern(scratch_);
  trans_[cell] = to;  // interning may have grown trans_, so index again
  return to;
}

void ContextWalker::bound_dfa() {
  // Bounds on what the shared DFA may hold before starting over (a few MB).
  constexpr size_t kMaxSets = 1 << 14, kMaxTransitions = 1 << 20, kMaxPoolNodes = 1 << 20,
                   kMaxSetElements = 1 << 21;
  if (!pool_ || set_hash_.size() > kMaxSets || trans_.size() > kMaxTransitions ||
      pool_->size() > kMaxPoolNodes || set_elems_ > kMaxSetElements)
    reset_dfa();
}

void ContextWalker::reset_dfa() {
  pool_ = std::make_unique<StackPool>(g_);
  set_items_.clear();
  set_begin_.assign(1, 0);
  set_hash_.clear();
  set_index_.clear();
  trans_.clear();
  has_ctx_.clear();
  loop_yes_.clear();
  loop_no_.clear();
  plain_run_.clear();
  plain_uniform_.clear();
  text_safe_.clear();
  closed_.clear();
  succ_.clear();
  succ_yes_.clear();
  succ_no_.clear();
  next_bytes_.clear();
  set_elems_ = 0;
}

const std::vector<uint32_t>& ContextWalker::live_roots(const VocabTrie& t, int32_t s) {
  // Bytes no stack can consume die; the few others that still do are dropped by the walk.
  const std::array<uint64_t, 4>& live = next_bytes_[s].bits;
  roots_.clear();
  for (int w = 0; w < 4; ++w)
    for (uint64_t bits = live[w] & t.root_bytes[w]; bits; bits &= bits - 1)
      roots_.push_back(t.root_child[w * 64 + __builtin_ctzll(bits)]);
  return roots_;
}

int32_t ContextWalker::start(const ContextKey* keys, size_t n) {
  bound_dfa();
  scratch_.clear();
  const int32_t empty = intern(scratch_);
  DI_CHECK(empty == kEmptySet, "the empty stack set is interned first");
  // Rebuild the known frames above the accept state (kStackEnd) or an unknown rest (kContext).
  for (size_t k = 0; k < n; ++k) {
    uint32_t s = StackPool::kContext;
    for (int i = key_depth(keys[k]) - 1; i >= 0; --i)
      s = keys[k][i] == kStackEnd ? StackPool::kAccept : pool_->node(s, keys[k][i]);
    scratch_.push_back(s);
  }
  state_at_[0] = intern(scratch_);
  esc_at_[0] = has_ctx_[state_at_[0]];
  return empty;
}

void ContextWalker::finish(TokenClasses& out, bool can_refine) const {
  out.refine = can_refine && out.uncertain.size() > kRefineUncertain;
  // Common prefixes between consecutive uncertain tokens (they are in byte order).
  const auto& tb = trie_->vocab->token_bytes;
  out.uncertain_lcp.resize(out.uncertain.size(), 0);
  for (size_t i = 1; i < out.uncertain.size(); ++i) {
    const std::string& a = tb[out.uncertain[i - 1]];
    const std::string& b = tb[out.uncertain[i]];
    size_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l] && l < 0xFFFF) ++l;
    out.uncertain_lcp[i] = static_cast<uint16_t>(l);
  }
}

std::unique_ptr<TokenClasses> ContextWalker::classify_below(const ContextKey& key,
                                                            const TokenClasses& shallower) {
  // Only the shallower key's uncertain tokens can change class: its accepted ones stay
  // accepted and its rejected ones died before reaching the frame this key adds. Each is
  // walked from this key's start state, reusing the states of the prefix it shares with the
  // previous one (the list is in byte order).
  const int32_t kEmpty = start(&key, 1);
  auto out = std::make_unique<TokenClasses>();
  out->base = &shallower;
  const auto& tb = trie_->vocab->token_bytes;
  size_t known = 0;             // state_at_[0..known] hold the last walked token's prefix states
  size_t dead = SIZE_MAX;       // that token died after `dead` bytes...
  bool dead_uncertain = false;  // ...and was uncertain (not rejected) then
  size_t lcp = 0, visits = 0;
  for (size_t i = 0; i < shallower.uncertain.size(); ++i) {
    lcp = i == 0 ? 0 : std::min<size_t>(lcp, shallower.uncertain_lcp[i]);
    const int32_t id = shallower.uncertain[i];
    const std::string& tok = tb[id];
    if (dead != SIZE_MAX && lcp >= dead) {  // shares the prefix that died: the same class
      if (dead_uncertain) out->uncertain.push_back(id);
      continue;
    }
    size_t j = std::min(lcp, known);
    lcp = SIZE_MAX;  // later tokens compare against this one
    dead = SIZE_MAX;
    for (; j < tok.size(); ++j, ++visits) {
      const int32_t from = state_at_[j];
      const uint8_t b = static_cast<uint8_t>(tok[j]);
      int32_t ns = trans_[static_cast<size_t>(from) * num_cols_ + byte_col_[b]];
      if (ns < 0) ns = step(from, b);
      if (ns == kEmpty) {
        dead = j + 1;
        dead_uncertain = esc_at_[j];
        break;
      }
      state_at_[j + 1] = ns;
      esc_at_[j + 1] = esc_at_[j] | has_ctx_[ns];
    }
    known = std::min(j, tok.size());
    if (dead == SIZE_MAX)
      out->accepted_ids.push_back(id);
    else if (dead_uncertain)
      out->uncertain.push_back(id);
  }
  last_visits_ = visits;
  finish(*out, !key_is_final(key));
  return out;
}

std::unique_ptr<TokenClasses> ContextWalker::classify(const ContextKey& key) {
  const bool can_refine = !key_is_final(key);
  start(&key, 1);
  auto out = scan(can_refine);
  if (!out->stopped_early) finish(*out, can_refine);
  return out;
}

std::unique_ptr<TokenClasses> ContextWalker::classify_set(const std::vector<ContextKey>& keys) {
  start(keys.data(), keys.size());
  auto out = scan(false);
  finish(*out, false);
  return out;
}

void ContextWalker::accepted_to_bits() {
  as_bits_ = true;
  accepted_bits_.assign(trie_->vocab->mask_words(), 0);
  for (int32_t id : accepted_ids_) accepted_bits_[id >> 5] |= 1u << (id & 31);
}

void ContextWalker::accept_tokens(const int32_t* first, const int32_t* last) {
  num_accepted_ += last - first;
  if (!as_bits_) {
    accepted_ids_.insert(accepted_ids_.end(), first, last);
    return;
  }
  for (; first != last; ++first) accepted_bits_[*first >> 5] |= 1u << (*first & 31);
}

void ContextWalker::accept_subtree(const VocabTrie& t, uint32_t k) {
  if (!as_bits_ && t.subtree_bits_at[k] != VocabTrie::kNoBits) accepted_to_bits();
  if (!as_bits_) {
    accept_tokens(t.tokens.data() + t.tok_begin[k], t.tokens.data() + t.tok_begin[t.end[k]]);
    return;
  }
  num_accepted_ += t.subtree_tokens(k);
  t.add_subtree(k, accepted_bits_.data());
}

template <ContextWalker::Tokens kWhich>
bool ContextWalker::walk(const VocabTrie& t, const std::vector<uint32_t>& tops, bool below_tops,
                         bool can_refine, std::vector<int32_t>& uncertain, size_t& visits) {
  const uint8_t* byte = t.byte.data();
  const uint32_t* depth = t.depth.data();
  const uint32_t* end = t.end.data();
  const uint32_t* tok_begin = t.tok_begin.data();
  const int32_t* tokens = t.tokens.data();
  const uint8_t* plain_path = t.plain_path.data();
  const uint8_t* plain_height = t.plain_height.data();
  for (uint32_t top : tops)
    for (uint32_t k = below_tops ? top + 1 : top, stop = end[top]; k < stop; ++visits) {
      if (kWhich == Tokens::kPlainOnly && !plain_path[k]) {  // no plain token below
        k = end[k];
        continue;
      }
      const uint32_t d = depth[k];
      const int32_t from = state_at_[d - 1];
      int32_t ns = trans_[static_cast<size_t>(from) * num_cols_ + byte_col_[byte[k]]];
      if (ns < 0) ns = step(from, byte[k]);
      if (ns == kEmptySet) {
        // The whole subtree shares this dead prefix; it is uncertain only if some path popped
        // below the known frames on the way (the real stack might continue it).
        if (esc_at_[d - 1]) {
          if (kWhich == Tokens::kPlainOnly && plain_height[k] == VocabTrie::kNotPlain) {
            for (uint32_t j = k; j < end[k];) {  // its plain tokens only, in byte order
              if (!plain_path[j]) {
                j = end[j];
                continue;
              }
              uncertain.insert(uncertain.end(), tokens + tok_begin[j], tokens + tok_begin[j + 1]);
              ++j;
            }
          } else {
            uncertain.insert(uncertain.end(), tokens + tok_begin[k], tokens + tok_begin[end[k]]);
          }
          if (can_refine && uncertain.size() > kMaxUncertainToDerive) return false;
        }
        k = end[k];
        continue;
      }
      if (kWhich == Tokens::kNotPlain && plain_path[k]) {  // its tokens are plain: classified
        if (plain_height[k] != VocabTrie::kNotPlain) {
          k = end[k];
        } else {
          state_at_[d] = ns;
          esc_at_[d] = esc_at_[d - 1] | has_ctx_[ns];
          ++k;
        }
        continue;
      }
      // Every token below keeps a live state: all accepted, no dead prefix, no visit. (Only
      // tokens that are all plain for kPlainOnly: the others are the non-plain trie's.)
      if ((kWhich != Tokens::kPlainOnly || plain_height[k] != VocabTrie::kNotPlain) &&
          subtree_accepted(t, ns, k)) {
        accept_subtree(t, k);
        k = end[k];
        continue;
      }
      accept_tokens(tokens + tok_begin[k], tokens + tok_begin[k + 1]);
      state_at_[d] = ns;
      esc_at_[d] = esc_at_[d - 1] | has_ctx_[ns];
      ++k;
    }
  return true;
}

bool ContextWalker::walk_class_run(const ClassRun& run, bool can_refine,
                                   std::vector<int32_t>& uncertain, size_t& visits) {
  if (run.loop || run.h >= run.table->frontier.size()) return true;
  state_at_[run.h] = run.end;
  esc_at_[run.h] = has_ctx_[run.end];  // no state before it on the run could pop
  return walk<Tokens::kPlainOnly>(*trie_, run.table->frontier[run.h], true, can_refine, uncertain,
                                  visits);
}

std::unique_ptr<TokenClasses> ContextWalker::scan(bool can_refine) {
  const VocabTrie& whole = *trie_;
  const int32_t words = whole.vocab->mask_words();

  // Accepted tokens are listed while few; the first large subtree accepted whole (a string
  // body takes most of the vocabulary) switches to a bitmask that ORs its precomputed words.
  accepted_ids_.clear();
  as_bits_ = false;
  num_accepted_ = 0;
  // Too many uncertain tokens for a refinable key: a deeper key scans the vocabulary itself.
  auto stopped_early = [&](size_t visited) {
    auto early = std::make_unique<TokenClasses>();
    early->refine = true;
    early->stopped_early = true;
    last_visits_ = visited;
    return early;
  };
  // A start state that survives any plain token (a string body) accepts them all at once;
  // one that survives n plain bytes and then none (near a bounded string's end) accepts
  // those of at most n bytes at once and rejects the rest. The walk skips their nodes.
  const bool all_plain =
      closed_over(state_at_[0], ClosedRuns::kPlain) || accepts_all_plain(state_at_[0]);
  const ShortPlainRun short_plain = all_plain ? ShortPlainRun{} : short_plain_run(state_at_[0]);
  if (short_plain.run > 0 && short_plain.escapes && can_refine &&
      whole.num_plain_tokens - whole.num_short_plain[short_plain.run] > kMaxUncertainToDerive) {
    return stopped_early(0);  // the longer plain tokens alone would stop the scan
  }
  const int short_run = short_plain.escapes ? 0 : short_plain.run;
  // A run of one class (a pattern's [0-9a-f]{8}): the plain tokens by the class's table.
  const ClassRun class_run_at_start =
      all_plain || short_plain.run > 0 ? ClassRun{} : class_run(state_at_[0]);
  // A string body that takes every character also takes the text tokens at once.
  const bool all_text = all_plain && whole.non_text &&
                        (closed_over(state_at_[0], ClosedRuns::kText | ClosedRuns::kTextChars) ||
                         text_safe(state_at_[0]));
  if (all_plain) {
    as_bits_ = true;
    accepted_bits_ = whole.plain_token_bits;
    num_accepted_ = whole.num_plain_tokens;
    if (all_text) {
      for (int32_t w = 0; w < words; ++w) accepted_bits_[w] |= whole.text_token_bits[w];
      num_accepted_ += whole.num_text_tokens;
    }
  } else if (short_run > 0) {
    as_bits_ = true;
    accepted_bits_.assign(whole.short_plain(short_run), whole.short_plain(short_run) + words);
    num_accepted_ = whole.num_short_plain[short_run];
  } else if (const ClassRun& run = class_run_at_start; run.table) {
    const size_t len = run.loop ? run.table->max_depth : run.h;
    const size_t n = run.table->num_up_to[len];
    if (n >= static_cast<size_t>(words)) {  // many: the bitmask, else the list
      as_bits_ = true;
      accepted_bits_.assign(run.table->up_to(len), run.table->up_to(len) + words);
      num_accepted_ = n;
    } else {
      accept_tokens(run.table->by_length.data(), run.table->by_length.data() + n);
    }
  }
  // With the plain tokens classified, only the others are walked, in their own small trie.
  const bool plain_classified = all_plain || short_run > 0 || class_run_at_start.table;
  const VocabTrie& t = all_text                              ? *whole.non_text
                       : plain_classified && whole.non_plain ? *whole.non_plain
                                                             : whole;
  auto out = std::make_unique<TokenClasses>();
  size_t visits = 0;
  // The class run's plain tokens past its end first; the non-plain trie's uncertain tokens
  // are merged in after them, in byte order (finish() and the run-time checks rely on it).
  if (class_run_at_start.table &&
      !walk_class_run(class_run_at_start, can_refine, out->uncertain, visits))
    return stopped_early(visits);
  const size_t run_uncertain = out->uncertain.size();
  // A first byte that leads nowhere rejects its subtree unless the start state may pop
  // below the known frames (then its tokens are uncertain, and the whole trie is scanned).
  const std::vector<uint32_t>& roots = esc_at_[0] ? t.root_children : live_roots(t, state_at_[0]);
  const bool done =
      plain_classified
          ? walk<Tokens::kNotPlain>(t, roots, false, can_refine, out->uncertain, visits)
          : walk<Tokens::kAll>(t, roots, false, can_refine, out->uncertain, visits);
  if (!done) return stopped_early(visits + 1);
  last_visits_ = visits;
  if (run_uncertain > 0 && run_uncertain < out->uncertain.size()) {
    const auto& tb = whole.vocab->token_bytes;
    std::inplace_merge(out->uncertain.begin(), out->uncertain.begin() + run_uncertain,
                       out->uncertain.end(), [&](int32_t a, int32_t b) { return tb[a] < tb[b]; });
  }
  if (num_accepted_ >= static_cast<size_t>(words)) {
    if (!as_bits_) accepted_to_bits();
    out->accepted_bits = accepted_bits_;
  } else if (as_bits_) {
    out->accepted_ids.reserve(num_accepted_);
    for (int32_t w = 0; w < words; ++w)
      for (uint32_t bits = accepted_bits_[w]; bits; bits &= bits - 1)
        out->accepted_ids.push_back(w * 32 + __builtin_ctz(bits));
  } else {
    out->accepted_ids.assign(accepted_ids_.begin(), accepted_ids_.end());
  }
  return out;
}

}  // namespace deepinfer::structured
