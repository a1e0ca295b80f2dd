// Classifies the whole vocabulary for one parser context (the top frames of a stack, with
// the deeper stack unknown): accepted whatever lies deeper, rejected, or uncertain (checked
// at run time against the real stack). One walker per thread; it reuses its buffers.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/structured/masks/class_run_table.h"
#include "deepinfer/structured/masks/closed_runs.h"
#include "deepinfer/structured/grammar_ir.h"
#include "deepinfer/structured/stack_pool.h"
#include "deepinfer/structured/masks/vocab_trie.h"

namespace deepinfer::structured {

// A context is the top d stack frames (d = 1..kContextFrames), grown one frame at a time only
// while too many tokens depend on what lies below: shallow keys are shared widely (every use
// of a character class, say) and deep ones pin down where a string or object ends.
inline constexpr int kContextFrames = 4;
// Slots past the known frames are kNoPos; kStackEnd marks that the stack ends (accepts) there.
using ContextKey = std::array<uint32_t, kContextFrames>;  // [0] = top
inline constexpr uint32_t kStackEnd = 0xFFFFFFFEu;
// Past this many uncertain tokens a key that can still grow asks for one more frame.
inline constexpr size_t kRefineUncertain = 16;
// Up to this many, the deeper key is classified from the shallower one's uncertain tokens
// alone; past it, the shallower scan stops early and the deeper key scans the vocabulary.
inline constexpr size_t kMaxUncertainToDerive = 512;

// Frames known in the key, and whether no deeper key exists (the stack ends, or d is maximal).
int key_depth(const ContextKey& k);
bool key_is_final(const ContextKey& k);
// The key less its deepest known frame (depth >= 2).
ContextKey shallower_key(ContextKey k);

struct ContextKeyHash {
  size_t operator()(const ContextKey& k) const {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (uint32_t x : k) h = (h ^ x) * 0xBF58476D1CE4E5B9ull;
    return static_cast<size_t>(h ^ (h >> 31));
  }
};

struct TokenClasses {
  // Tokens valid whatever the deeper stack holds: base's (the shallower key's, when this
  // classification was derived from it) plus a bitmask when many, else a list.
  const TokenClasses* base = nullptr;
  std::vector<uint32_t> accepted_bits;  // [mask_words] or empty
  std::vector<int32_t> accepted_ids;    // used when accepted_bits is empty
  // Tokens that depend on the deeper stack, in byte order, with the length of the prefix each
  // shares with the previous one (so run-time checks reuse the states of common prefixes).
  std::vector<int32_t> uncertain;
  std::vector<uint16_t> uncertain_lcp;  // [uncertain]
  // Too many uncertain tokens: use the key one frame deeper instead (classified from this).
  bool refine = false;
  // The scan stopped at kMaxUncertainToDerive uncertain tokens: the lists are not filled.
  bool stopped_early = false;
  bool complete() const { return !stopped_early; }

  void add_accepted(uint32_t* mask) const;
  size_t memory_bytes() const;
};

// Bytes no byte class of the grammar tells apart share a column of a walker's transition
// table, which keeps the table small enough to stay in cache during the vocabulary scan.
struct ByteColumns {
  std::array<uint8_t, 256> col{};
  int num = 0;
};
ByteColumns byte_columns(const Grammar& g);

class ContextWalker {
 public:
  ContextWalker(const Grammar* g, std::shared_ptr<const VocabTrie> trie, const ByteColumns& cols);
  std::unique_ptr<TokenClasses> classify(const ContextKey& key);
  // The classification of `key` from the one of its shallower key (key less its deepest
  // frame): only that one's uncertain tokens are walked, and its accepted ones are shared
  // (`shallower` must outlive the result).
  std::unique_ptr<TokenClasses> classify_below(const ContextKey& key,
                                               const TokenClasses& shallower);
  // The classification of a set of keys at once (a matcher's stacks, each cut to
  // kContextFrames frames): a token is accepted when some key accepts it; uncertain ones are
  // checked against the real stacks at run time; never refined.
  std::unique_ptr<TokenClasses> classify_set(const std::vector<ContextKey>& keys);
  // Trie nodes (or token bytes) the last classification visited: the scan's work, whatever
  // the machine's speed.
  size_t last_visits() const { return last_visits_; }

 private:
  // The empty stack set (every stack died): the first set interned after each reset.
  static constexpr int32_t kEmptySet = 0;
  // The DFA state of stack set v (sorted in place), added when new.
  int32_t intern(std::vector<uint32_t>& v);
  // The trie's depth-1 nodes whose byte some stack of state s consumes (in byte order; the
  // others kill it): a scan that need not list rejected tokens skips the rest (a literal's
  // context has one).
  const std::vector<uint32_t>& live_roots(const VocabTrie& t, int32_t s);
  // Sets state_at_[0] and esc_at_[0] to the start state of the keys' stacks; returns the
  // dead state.
  int32_t start(const ContextKey* keys, size_t n);
  // Classifies the vocabulary from state_at_[0] (refine and the common prefixes are left to
  // finish()).
  std::unique_ptr<TokenClasses> scan(bool can_refine);
  // Sets refine and the uncertain tokens' common prefixes.
  void finish(TokenClasses& out, bool can_refine) const;
  size_t set_size(int32_t s) const { return set_begin_[s + 1] - set_begin_[s]; }
  int32_t step(int32_t from, uint8_t byte);
  void reset_dfa();
  // Keeps the DFA across calls (states are stack sets, whatever context started them) until
  // it grows past a bound.
  void bound_dfa();
  // True when state s goes back to itself on every byte of `bytes` (so every token of a
  // subtree below s made of those bytes is accepted, ending in s). Answers are cached per
  // state and byte column.
  bool loops_on(int32_t s, const std::array<uint64_t, 4>& bytes);
  // How many plain bytes (VocabTrie::plain) state s survives without dying, while every plain
  // byte leads to one same next state (as in a JSON string body, whatever else the grammar
  // tells apart: digits, literals): 255 for a loop, n for a counted run with n copies left,
  // else 0. Underestimates are safe (fewer subtrees accepted whole).
  int plain_run(int32_t s);
  // Every plain byte takes state x to the same next state, by a look at its stacks' byte
  // classes (no step). Cached per state.
  bool plain_uniform(int32_t x);
  // Every state reached from s character by character (a plain byte, or a well-formed UTF-8
  // character of two to four bytes) takes every character again, dying on no prefix of one
  // (a JSON string body that allows any character, well before any maxLength): s accepts
  // every text token (is_text_token). Cached per state.
  bool text_safe(int32_t s);
  // Fills utf8_paths_ from the byte columns.
  void build_utf8_paths();
  // Every byte of `bytes` (not empty) leads from s to succ_[s]: the first live state met
  // from s, set on the first call that steps a byte column of s (columns are stepped only as
  // asked), so it is set whenever the answer is yes.
  bool leads_to_successor(int32_t s, const std::array<uint64_t, 4>& bytes);
  // Every path of at most h bytes of `bytes` from s stays alive, each byte leading to the
  // successor (a counted run of a byte class, or a loop on it).
  bool run_covers(int32_t s, const std::array<uint64_t, 4>& bytes, int h);
  // State s takes every run of a ClosedRuns set in `which` (kPlain, kText, kTextChars), by
  // its stacks' positions alone (no step). Cached per state (asked at every subtree the scan
  // meets).
  bool closed_over(int32_t s, uint8_t which) {
    if (closed_[s] < 0) closed_[s] = closed_bits(s);
    return (closed_[s] & which) != 0;
  }
  int8_t closed_bits(int32_t s);
  // State s survives every plain token (VocabTrie::plain_token_bits).
  bool accepts_all_plain(int32_t s);
  // State s survives exactly `run` plain bytes (1..VocabTrie::max_short_plain) and then dies
  // on every plain byte, as near the end of a bounded string body: plain tokens of at most
  // `run` bytes are accepted (VocabTrie::short_plain), and longer ones are rejected, or
  // uncertain when some stack may pop below the known frames on the way (`escapes`: the
  // string may end there, and what follows is not known). run = 0 otherwise.
  struct ShortPlainRun {
    int run = 0;
    bool escapes = false;
  };
  ShortPlainRun short_plain_run(int32_t s);
  // The subtree below node k of trie t (entered in state s) is accepted whole.
  bool subtree_accepted(const VocabTrie& t, int32_t s, uint32_t k);
  // State s takes exactly one class C among the plain bytes, every byte of C to one same next
  // state, with no stack that may pop below the known frames, for h >= 1 bytes in a row
  // (each state on the way alike): the run ends in state `end` (h bytes on), or loops back
  // on itself (then it never ends). Plain tokens are then classified by the class's
  // ClassRunTable: its tokens of at most h bytes (any length for a loop) are accepted, one
  // with another plain byte within the first h is rejected, and only the subtrees at depth h
  // are walked, from `end`. table = null when no run applies.
  struct ClassRun {
    const ClassRunTable* table = nullptr;
    size_t h = 0;
    bool loop = false;
    int32_t end = -1;
  };
  ClassRun class_run(int32_t s);
  // Which tokens a walk classifies: all; those that are not plain (the plain ones are
  // classified already, by bitmask); only the plain ones (a class run's subtrees).
  enum class Tokens { kAll, kNotPlain, kPlainOnly };
  // Walks the subtrees of trie t's nodes `tops` (below each only, with below_tops; state_at_
  // and esc_at_ set for the depth above what is walked), adding accepted tokens as the
  // scan's and uncertain ones to `uncertain`. False when a refinable scan passes
  // kMaxUncertainToDerive uncertain tokens.
  template <Tokens kWhich>
  bool walk(const VocabTrie& t, const std::vector<uint32_t>& tops, bool below_tops,
            bool can_refine, std::vector<int32_t>& uncertain, size_t& visits);
  // Walks the subtrees at depth run.h of run.table (whole trie) from run.end, for their plain
  // tokens only (a scan walks the others in the non-plain trie): accepted ones are added as
  // the scan's, uncertain ones to `uncertain`. False when a refinable scan passes
  // kMaxUncertainToDerive uncertain tokens (the caller stops early).
  bool walk_class_run(const ClassRun& run, bool can_refine, std::vector<int32_t>& uncertain,
                      size_t& visits);
  // The scan's accepted tokens (accepted_ids_ while few, else accepted_bits_; num_accepted_
  // counts them): a list, a whole subtree (its precomputed words once it holds many).
  void accept_tokens(const int32_t* first, const int32_t* last);
  void accept_subtree(const VocabTrie& t, uint32_t k);
  void accepted_to_bits();

  const Grammar* g_;
  std::shared_ptr<const VocabTrie> trie_;
  std::unique_ptr<StackPool> pool_;
  // A lazily built DFA over stack sets for the current context.
  // Stack sets stored once, back to back: set s is set_items_[set_begin_[s], set_begin_[s+1]).
  // An open-addressing index (-1 = free slot, size a power of two, at most half full) finds
  // a set by content without a second copy or an allocation per set.
  std::vector<uint32_t> set_items_;
  std::vector<uint32_t> set_begin_{0};
  std::vector<uint64_t> set_hash_;
  std::vector<int32_t> set_index_;
  std::array<uint8_t, 256> byte_col_{};
  int num_cols_ = 0;
  std::vector<int32_t> trans_;  // [sets * num_cols_], -1 = not computed yet
  std::vector<uint8_t> has_ctx_;
  std::vector<std::array<uint64_t, 4>> loop_yes_, loop_no_;  // [sets] bytes known to (not) loop
  std::vector<int16_t> plain_run_;                           // [sets] -1 = not computed
  std::vector<int8_t> plain_uniform_;                        // [sets] -1 = not computed
  std::vector<int32_t> succ_;  // [sets] leads_to_successor's successor; -1 = none met yet
  std::vector<ByteSet> succ_yes_, succ_no_;  // [sets] bytes known to lead (not) to it
  std::vector<int8_t> text_safe_;                            // [sets] -1 = not computed
  ClosedRuns runs_;
  // The class tables this walker has asked for (a few classes per grammar), by class.
  std::vector<std::pair<std::array<uint64_t, 4>, std::shared_ptr<const ClassRunTable>>>
      class_tables_;
  std::vector<int8_t> closed_;  // [sets] closed_bits' ClosedRuns sets; -1 = not computed
  // Every well-formed multi-byte UTF-8 character, one path per sequence of byte columns, as
  // a preorder trie: (depth 1..4, a byte of the column). A node is a whole character when the
  // next one is no deeper. text_safe steps each character from a state along these.
  std::vector<std::pair<uint8_t, uint8_t>> utf8_paths_;
  // [sets] bytes some stack of the set can consume: a byte outside leads to the dead state
  // (inside, it usually does not), so first bytes and plain runs are ruled out without
  // stepping every byte column.
  std::vector<ByteSet> next_bytes_;
  // The columns holding plain bytes, each with one of its plain bytes.
  std::vector<std::pair<int, uint8_t>> plain_cols_;
  std::vector<int32_t> chain_;  // plain_run's scratch
  size_t set_elems_ = 0;        // stacks held by all sets (a memory bound)
  std::array<std::array<uint64_t, 4>, 256> col_bytes_{};  // [column] its bytes
  std::vector<uint32_t> roots_;                           // live_roots' result
  std::vector<uint32_t> scratch_;
  std::vector<int32_t> accepted_ids_;    // classify's accepted tokens while few
  std::vector<uint32_t> accepted_bits_;  // and as [mask_words] once many
  bool as_bits_ = false;
  size_t num_accepted_ = 0;
  std::vector<int32_t> state_at_;        // [max_len + 1] per trie depth on the current path
  std::vector<uint8_t> esc_at_;          // [max_len + 1] some path popped below the known frames
  size_t last_visits_ = 0;
};

}  // namespace deepinfer::structured
