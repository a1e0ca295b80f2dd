// See draft_model_drafter.h. Per sequence the drafter keeps `fed`, the tokens whose KV its
// blocks hold (positions 0..fed.size()), and the blocks. A call compares fed with the
// sequence's tokens: the common prefix stays (rollback = forgetting the rest, whose blocks are
// rewritten later), the remainder is fed in catch-up forwards, and each further draft is one
// more token per sequence, all sequences in one forward.
#include "deepinfer/engine/speculative/draft_model_drafter.h"

#include <algorithm>
#include <unordered_map>

#include "deepinfer/base/log.h"
#include "deepinfer/engine/batch_builder.h"
#include "deepinfer/engine/runner_io.h"
#include "deepinfer/engine/speculative/draft_kv_blocks.h"
#include "deepinfer/engine/speculative/greedy_draft.h"

namespace deepinfer::engine::speculative {
namespace {

class DraftModelDrafter final : public Drafter {
 public:
  DraftModelDrafter(std::shared_ptr<model::Model> model, ThreadPool* pool, const DraftModelOptions& o)
      : model_(std::move(model)), pool_(pool), options_(o), blocks_(o.num_blocks, o.block_size) {
    model::KvCacheSpec spec = model_->kv_cache_spec();
    spec.dtype = o.kv_dtype;
    kv_ = model::KvCache::allocate(spec, o.num_blocks, o.block_size);
  }

  std::vector<Draft> propose(std::span<const DraftInput> seqs) override;
  void forget(int64_t seq_id) override {
    blocks_.release(seq_id);
    states_.erase(seq_id);
  }
  std::string_view name() const override { return "draft"; }

 private:
  struct SeqState {
    std::vector<int32_t> fed;  // tokens whose KV its blocks hold, from position 0
  };
  struct Work {
    size_t out = 0;       // index into the call's drafts
    int64_t seq_id = 0;
    SeqState* state = nullptr;
    std::span<const int32_t> tokens;
    int want = 0;         // drafts wanted
    bool done = false;    // no more drafts (an end token, non-finite logits)
  };

  void add_row(RunnerInput& in, Work& w, std::span<const int32_t> tokens, bool samples);
  Status forward(const RunnerInput& in);
  void take_draft(Work& w, std::vector<Draft>& out, size_t row);
  bool catch_up(std::vector<Work>& work, std::vector<Draft>& out);

  std::shared_ptr<model::Model> model_;
  ThreadPool* pool_;
  DraftModelOptions options_;
  DraftKvBlocks blocks_;
  model::KvCache kv_;
  std::unordered_map<int64_t, SeqState> states_;
  std::vector<float> logits_;  // [rows * vocab] of the last forward
  bool warned_ = false;
};

void DraftModelDrafter::add_row(RunnerInput& in, Work& w, std::span<const int32_t> tokens, bool samples) {
  SeqState& st = *w.state;
  RunnerSeq& r = in.seqs.emplace_back();
  r.seq_id = w.seq_id;
  r.first_position = static_cast<int>(st.fed.size());
  r.token_ids.assign(tokens.begin(), tokens.end());
  st.fed.insert(st.fed.end(), tokens.begin(), tokens.end());
  r.block_table = blocks_.table(w.seq_id, static_cast<int>(st.fed.size()));
  r.samples = samples;
}

Status DraftModelDrafter::forward(const RunnerInput& in) {
  BatchInputs b = build_forward_batch(in, options_.block_size);
  b.batch.slot_mapping = std::move(b.slot_mapping);
  logits_.resize(b.batch.logits_rows.size() * static_cast<size_t>(model_->config().vocab_size));
  model::ForwardContext ctx{pool_, options_.batch_invariant, options_.int8_activations};
  return model_->forward(b.batch, kv_, ctx, logits_.data());
}

void DraftModelDrafter::take_draft(Work& w, std::vector<Draft>& out, size_t row) {
  const int32_t vocab = static_cast<int32_t>(model_->config().vocab_size);
  const GreedyDraft a = greedy_draft(logits_.data() + row * static_cast<size_t>(vocab), vocab);
  Draft& d = out[w.out];
  if (a.token < 0) {
    w.done = true;
    return;
  }
  d.tokens.push_back(a.token);
  d.signals.push_back(signal_of(a.prob));
  const auto& end = options_.end_tokens;
  if (static_cast<int>(d.tokens.size()) >= w.want || std::find(end.begin(), end.end(), a.token) != end.end())
    w.done = true;
}

// Feeds every sequence's unseen tokens (chunked under max_batch_tokens per forward); the
// forward that feeds a sequence's last token gives its first draft.
bool DraftModelDrafter::catch_up(std::vector<Work>& work, std::vector<Draft>& out) {
  for (;;) {
    RunnerInput in;
    std::vector<Work*> rows;
    int budget = options_.max_batch_tokens;
    for (Work& w : work) {
      const size_t seen = w.state->fed.size();
      if (seen >= w.tokens.size()) continue;
      const int left = static_cast<int>(w.tokens.size() - seen);
      const int n = std::min(left, std::max(1, budget));
      budget -= n;
      add_row(in, w, w.tokens.subspan(seen, static_cast<size_t>(n)), n == left);
      if (n == left) rows.push_back(&w);
    }
    if (in.seqs.empty()) return true;
    if (Status st = forward(in); !st.is_ok()) {
      if (!warned_) log::warn("draft model: {}; no drafts from it this step", st.message());
      warned_ = true;
      return false;
    }
    for (size_t i = 0; i < rows.size(); ++i) take_draft(*rows[i], out, i);
  }
}

std::vector<Draft> DraftModelDrafter::propose(std::span<const DraftInput> seqs) {
  std::vector<Draft> out(seqs.size());
  std::vector<Work> work;
  blocks_.begin_call();
  const int max_position = static_cast<int>(model_->config().max_position);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const DraftInput& s = seqs[i];
    const int len = static_cast<int>(s.tokens.size());
    // Drafts j < want are fed back (KV at positions len .. len + want - 2).
    const int want = std::min(s.max_tokens, max_position - len);
    if (want <= 0 || len == 0) continue;
    SeqState& st = states_[s.seq_id];
    blocks_.touch(s.seq_id);
    // Rollback: keep the longest prefix of what was fed that the sequence still has, but feed
    // at least its last token (whose logits give the first draft).
    const auto diverge = std::mismatch(st.fed.begin(), st.fed.end(), s.tokens.begin(), s.tokens.end());
    const size_t keep = std::min(static_cast<size_t>(diverge.first - st.fed.begin()), s.tokens.size() - 1);
    st.fed.resize(keep);
    // Ids the draft model has no embedding for (e.g. image placeholders): no drafts.
    const int64_t vocab = model_->config().vocab_size;
    if (std::any_of(s.tokens.begin() + static_cast<std::ptrdiff_t>(keep), s.tokens.end(),
                    [&](int32_t t) { return t < 0 || t >= vocab; })) {
      forget(s.seq_id);
      continue;
    }
    if (!blocks_.reserve(s.seq_id, len + want - 1, [this](int64_t victim) { forget(victim); })) {
      forget(s.seq_id);  // the pool is full of sequences drafting now: none for this one
      continue;
    }
    work.push_back({i, s.seq_id, &st, s.tokens, want, false});
  }
  if (work.empty()) return out;
  bool ok = catch_up(work, out);
  // One forward per further draft position, every sequence still drafting in it.
  while (ok) {
    RunnerInput in;
    std::vector<Work*> rows;
    for (Work& w : work) {
      if (w.done || out[w.out].tokens.empty()) continue;
      add_row(in, w, std::span<const int32_t>(&out[w.out].tokens.back(), 1), true);
      rows.push_back(&w);
    }
    if (in.seqs.empty()) break;
    if (Status st = forward(in); !st.is_ok()) {
      if (!warned_) log::warn("draft model: {}; no drafts from it this step", st.message());
      warned_ = true;
      ok = false;
      break;
    }
    for (size_t i = 0; i < rows.size(); ++i) take_draft(*rows[i], out, i);
  }
  if (!ok) {
    // What the failed forward wrote is unknown: these sequences start over next time.
    for (Work& w : work) {
      out[w.out] = Draft{};
      forget(w.seq_id);
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<Drafter> make_draft_model_drafter(std::shared_ptr<model::Model> model, ThreadPool* pool,
                                                  const DraftModelOptions& options) {
  return std::make_unique<DraftModelDrafter>(std::move(model), pool, options);
}

}  // namespace deepinfer::engine::speculative
