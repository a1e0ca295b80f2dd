// What a DFA state of the context walker does over runs of bytes (see context_walker.h): plain
// runs, text characters, counted runs of a byte class, loops. The answers let a scan accept a
// whole trie subtree, or every plain or text token, without visiting it.
#include "deepinfer/structured/masks/context_walker.h"

#include <algorithm>

namespace deepinfer::structured {

int ContextWalker::plain_run(int32_t s) {
  if (plain_cols_.empty()) return 0;
  if (plain_run_[s] >= 0) return plain_run_[s];
  // Follow plain bytes from s until the run's end is known: a loop (255: any length), a
  // dead state (0), a state already known, or 255 steps (0: an underestimate, so safe). A
  // state met again on the way reads 0 (in progress): also an underestimate.
  std::vector<int32_t>& chain = chain_;
  chain.clear();
  int run = 0;
  for (int32_t x = s;;) {
    plain_run_[x] = 0;
    chain.push_back(x);
    if (chain.size() > 255) break;
    // A plain byte no stack consumes dies, so the run ends here (dead or parting ways).
    bool all_consumed = true;
    for (int w = 0; w < 4; ++w)
      all_consumed &= (next_bytes_[x].bits[w] & trie_->plain[w]) == trie_->plain[w];
    if (!all_consumed) break;
    int32_t to = -1;
    bool one_next = true;
    if (plain_uniform(x)) {  // one step answers for every plain column
      const auto [col0, rep0] = plain_cols_.front();
      to = trans_[static_cast<size_t>(x) * num_cols_ + col0];
      if (to < 0) to = step(x, rep0);
      for (const auto& col_and_byte : plain_cols_)
        trans_[static_cast<size_t>(x) * num_cols_ + col_and_byte.first] = to;
    } else {
      for (const auto& [col, rep] : plain_cols_) {
        int32_t next = trans_[static_cast<size_t>(x) * num_cols_ + col];
        if (next < 0) next = step(x, rep);
        if (to >= 0 && next != to) {
          one_next = false;
          break;
        }
        to = next;
      }
    }
    if (!one_next) break;  // plain bytes part ways here: count no further (an underestimate)
    if (to == x) {
      run = 255;
      break;
    }
    if (set_size(to) == 0) break;
    if (plain_run_[to] >= 0) {
      run = std::min(255, 1 + plain_run_[to]);
      break;
    }
    x = to;
  }
  for (size_t i = chain.size(); i-- > 0; run = std::min(255, run + 1))
    plain_run_[chain[i]] = static_cast<int16_t>(run);
  return plain_run_[s];
}

bool ContextWalker::plain_uniform(int32_t x) {
  if (plain_uniform_[x] >= 0) return plain_uniform_[x];
  // Every stack's byte class holds all the plain bytes or none: the same stacks go on
  // whichever plain byte comes, so every plain byte leads to the same next state.
  const auto& plain = trie_->plain;
  bool uniform = true;
  for (uint32_t i = set_begin_[x]; i < set_begin_[x + 1] && uniform; ++i) {
    const uint32_t st = set_items_[i];
    if (st == StackPool::kAccept || st == StackPool::kContext) continue;
    const ByteSet& b = g_->byte_sets[g_->elements[pool_->pos(st)].arg];
    bool none = true, all = true;
    for (int w = 0; w < 4; ++w) {
      const uint64_t m = b.bits[w] & plain[w];
      none &= m == 0;
      all &= m == plain[w];
    }
    uniform = none || all;
  }
  plain_uniform_[x] = uniform;
  return uniform;
}

void ContextWalker::build_utf8_paths() {
  // One path per sequence of byte columns meeting a multi-byte form's ranges.
  auto follow = [&](auto&& self, const Utf8Form& f, int i) -> void {
    if (i >= f.len || i >= 4) return;
    std::array<bool, 256> seen{};
    for (int b = f.lo[i]; b <= f.hi[i]; ++b) {
      if (seen[byte_col_[b]]) continue;
      seen[byte_col_[b]] = true;
      utf8_paths_.push_back({static_cast<uint8_t>(i + 1), static_cast<uint8_t>(b)});
      self(self, f, i + 1);
    }
  };
  for (const Utf8Form& f : kUtf8Forms) follow(follow, f, 0);
}

bool ContextWalker::text_safe(int32_t s) {
  if (text_safe_[s] >= 0) return text_safe_[s];
  if (trie_->num_text_tokens == 0 || plain_cols_.empty()) {
    text_safe_[s] = 0;
    return false;
  }
  // The states after one whole character from x (plain byte or multi-byte form) go to
  // `after`; false when some character, or a prefix of one, dies.
  std::vector<int32_t> after;
  auto characters = [&](int32_t x) {
    after.clear();
    for (const auto& col_and_byte : plain_cols_) {
      const int32_t to = step(x, col_and_byte.second);
      if (to == kEmptySet) return false;
      after.push_back(to);
    }
    int32_t at[5];  // at[d] = the state after the first d bytes of the current path
    at[0] = x;
    for (size_t n = 0; n < utf8_paths_.size(); ++n) {
      const auto [depth, byte] = utf8_paths_[n];
      const int32_t to = step(at[depth - 1], byte);
      if (to == kEmptySet) return false;
      at[depth] = to;
      if (n + 1 == utf8_paths_.size() || utf8_paths_[n + 1].first <= depth) after.push_back(to);
    }
    return true;
  };
  // Greatest fixpoint over the states reached character by character: every state met must
  // take every character (a state met again counts as safe). Past kMaxStates, give up.
  constexpr size_t kMaxStates = 64;
  std::vector<int32_t> todo = {s}, met = {s};
  bool safe = true;
  while (safe && !todo.empty()) {
    const int32_t x = todo.back();
    todo.pop_back();
    if (text_safe_[x] == 1) continue;
    if (text_safe_[x] == 0 || !characters(x)) {
      safe = false;
      break;
    }
    for (int32_t y : after)
      if (std::find(met.begin(), met.end(), y) == met.end()) {
        if (met.size() == kMaxStates) {
          safe = false;
          break;
        }
        met.push_back(y);
        todo.push_back(y);
      }
  }
  if (safe) {
    for (int32_t x : met) text_safe_[x] = 1;  // each met state's characters all stayed safe
  } else {
    text_safe_[s] = 0;
  }
  return safe;
}

int8_t ContextWalker::closed_bits(int32_t s) {
  // The bytes of each set that some stack takes into a closed continuation; by characters,
  // also the lead bytes of the multi-byte characters some stack takes whole.
  const ByteSet& plain_bytes = runs_.bytes(ClosedRuns::kPlain);
  const ByteSet& text_bytes = runs_.bytes(ClosedRuns::kText);
  ByteSet plain, text, chars, leads;
  for (uint32_t i = set_begin_[s]; i < set_begin_[s + 1]; ++i) {
    const uint32_t st = set_items_[i];
    if (st == StackPool::kAccept || st == StackPool::kContext) continue;
    const uint32_t p = pool_->pos(st);
    // A class with no byte of the sets adds nothing: no question about what follows it (a
    // key's opening quote would ask about the whole trie of declared names behind it).
    const ByteSet& b = g_->byte_sets[g_->elements[p].arg];
    if (!b.intersects(text_bytes)) continue;
    uint8_t after = runs_.after(p);
    // A rule that ends after this byte or character (a character rule's alternatives) goes
    // on where its call returns, when that frame is known.
    const uint32_t caller = pool_->parent(st);
    if (!after && caller != StackPool::kAccept && caller != StackPool::kContext) {
      const bool one_byte = g_->elements[p + 1].kind == ElemKind::kEndAlt;
      const ByteSet whole = runs_.multibyte_leads(p);
      if (one_byte || !whole.empty()) {
        const uint8_t back = runs_.after_return(pool_->pos(caller));
        if (one_byte) after = back;
        if (back & ClosedRuns::kTextChars)
          for (int w = 0; w < 4; ++w) leads.bits[w] |= whole.bits[w];
      }
    }
    if (!after) continue;
    for (int w = 0; w < 4; ++w) {
      if (after & ClosedRuns::kPlain) plain.bits[w] |= b.bits[w] & plain_bytes.bits[w];
      if (after & ClosedRuns::kText) text.bits[w] |= b.bits[w] & text_bytes.bits[w];
      if (after & ClosedRuns::kTextChars) chars.bits[w] |= b.bits[w] & plain_bytes.bits[w];
    }
  }
  const bool by_characters = chars == plain_bytes && ClosedRuns::every_lead(leads);
  return static_cast<int8_t>((plain == plain_bytes ? ClosedRuns::kPlain : 0) |
                             (text == text_bytes ? ClosedRuns::kText : 0) |
                             (by_characters ? ClosedRuns::kTextChars : 0));
}

bool ContextWalker::accepts_all_plain(int32_t s) {
  return trie_->max_len < 255 && trie_->num_plain_tokens > 0 &&
         plain_run(s) >= static_cast<int>(trie_->max_len);
}

ContextWalker::ShortPlainRun ContextWalker::short_plain_run(int32_t s) {
  ShortPlainRun out;
  const int run = plain_run(s);
  if (run <= 0 || run > static_cast<int>(trie_->max_short_plain)) return out;
  // plain_run may underestimate (a run it stopped counting); the walk to its end and the
  // check that every plain byte dies there make the answer exact.
  int32_t x = s;
  for (int i = 0;; ++i) {
    out.escapes |= has_ctx_[x] != 0;
    if (i == run) break;
    x = step(x, plain_cols_.front().second);
  }
  for (const auto& col_and_byte : plain_cols_)
    if (step(x, col_and_byte.second) != kEmptySet) return out;
  out.run = run;
  return out;
}

bool ContextWalker::subtree_accepted(const VocabTrie& t, int32_t s, uint32_t k) {
  const uint8_t ph = t.plain_height[k];
  if (ph != VocabTrie::kNotPlain && ph > 0 &&
      (closed_over(s, ClosedRuns::kPlain) || plain_run(s) >= ph))
    return true;
  if (t.below[k] == 0) return false;
  const auto& bytes = t.below_sets[t.below[k]];
  if (closed_over(s, ClosedRuns::kText)) {
    const ByteSet& text = runs_.bytes(ClosedRuns::kText);
    bool text_only = true;
    for (int w = 0; w < 4; ++w) text_only &= (bytes[w] & ~text.bits[w]) == 0;
    if (text_only) return true;
  }
  if (loops_on(s, bytes)) return true;
  // A counted run of the subtree's bytes long enough for its longest path (checked only when
  // the state consumes every byte of the subtree at all).
  for (int w = 0; w < 4; ++w)
    if (bytes[w] & ~next_bytes_[s].bits[w]) return false;
  return t.height[k] < 255 && run_covers(s, bytes, t.height[k]);
}

bool ContextWalker::leads_to_successor(int32_t s, const std::array<uint64_t, 4>& bytes) {
  // Known answers first; then only the unknown columns of `bytes` are stepped, and the first
  // that parts ways ends the check, so a new state's other columns are not expanded for an
  // answer that is usually no.
  for (int w = 0; w < 4; ++w)
    if (bytes[w] & succ_no_[s].bits[w]) return false;
  for (int w = 0; w < 4; ++w)
    for (uint64_t left = bytes[w] & ~succ_yes_[s].bits[w]; left;) {
      const int b = w * 64 + __builtin_ctzll(left);
      const int col = byte_col_[b];
      left &= ~col_bytes_[col][w];
      int32_t to = trans_[static_cast<size_t>(s) * num_cols_ + col];
      if (to < 0) to = step(s, static_cast<uint8_t>(b));
      if (succ_[s] < 0 && to != kEmptySet) succ_[s] = to;  // the first live successor met
      ByteSet& mark = to == succ_[s] ? succ_yes_[s] : succ_no_[s];
      for (int i = 0; i < 4; ++i) mark.bits[i] |= col_bytes_[col][i];
      if (to != succ_[s]) return false;
    }
  return true;
}

bool ContextWalker::run_covers(int32_t s, const std::array<uint64_t, 4>& bytes, int h) {
  int32_t x = s;
  for (int i = 0; i < h; ++i) {
    if (!leads_to_successor(x, bytes)) return false;
    if (succ_[x] == x) return true;  // a loop on these bytes: any length
    x = succ_[x];
  }
  return true;
}

bool ContextWalker::loops_on(int32_t s, const std::array<uint64_t, 4>& bytes) {
  for (int w = 0; w < 4; ++w)
    if (bytes[w] & loop_no_[s][w]) return false;
  for (int w = 0; w < 4; ++w) {
    uint64_t unknown = bytes[w] & ~loop_yes_[s][w];
    while (unknown) {
      const int b = w * 64 + __builtin_ctzll(unknown);
      const int col = byte_col_[b];
      int32_t to = trans_[static_cast<size_t>(s) * num_cols_ + col];
      if (to < 0) to = step(s, static_cast<uint8_t>(b));
      auto& mark = to == s ? loop_yes_[s] : loop_no_[s];
      for (int i = 0; i < 4; ++i) mark[i] |= col_bytes_[col][i];
      if (to != s) return false;
      unknown &= ~loop_yes_[s][w];
    }
  }
  return true;
}

ContextWalker::ClassRun ContextWalker::class_run(int32_t s) {
  // A class of one or two bytes is a literal's: its scan walks one first byte or two anyway.
  // A run of one byte gains little (every token of the class is still walked past it), and
  // each class kept costs a table: a run must be longer, or a loop.
  constexpr int kMinClassBytes = 3;
  constexpr size_t kMinRun = 2;
  ClassRun run;
  if (trie_->num_plain_tokens == 0 || has_ctx_[s]) return run;
  ByteSet c;
  for (int w = 0; w < 4; ++w) c.bits[w] = next_bytes_[s].bits[w] & trie_->plain[w];
  if (c.count() < kMinClassBytes) return run;
  // Follow the run while each state takes exactly c among the plain bytes, all alike, and
  // cannot pop below the known frames (a token is no longer than max_len).
  int32_t x = s;
  size_t h = 0;
  while (h < trie_->max_len) {
    if (h > 0) {
      if (has_ctx_[x]) break;
      ByteSet live;
      for (int w = 0; w < 4; ++w) live.bits[w] = next_bytes_[x].bits[w] & trie_->plain[w];
      if (live != c) break;
    }
    if (!leads_to_successor(x, c.bits)) break;
    if (succ_[x] == x) {
      run.loop = true;
      break;
    }
    x = succ_[x];
    ++h;
  }
  if (!run.loop && h < kMinRun) return run;
  // A table costs about one walk of the class's paths (once per tokenizer and class): the
  // next context of the same run already saves it.
  const ClassRunTable* table = nullptr;
  for (const auto& [bits, t] : class_tables_)
    if (bits == c.bits) table = t.get();
  if (!table) {
    class_tables_.push_back({c.bits, shared_class_run_table(trie_, c)});
    table = class_tables_.back().second.get();
  }
  if (!table || table->max_depth == 0) return ClassRun{};
  // Past the longest path of c nothing is left to tell: the run ends there.
  if (h > table->max_depth) {
    run.loop = false;
    h = table->max_depth;
    x = s;
    for (size_t i = 0; i < h; ++i) x = succ_[x];
  }
  run.table = table;
  run.h = h;
  run.end = x;
  return run;
}

}  // namespace deepinfer::structured
