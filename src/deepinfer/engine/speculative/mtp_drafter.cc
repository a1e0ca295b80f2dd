// See mtp_drafter.h. Positions: the MTP layer at position p takes the target's hidden state h_p
// and token x_{p+1} and predicts x_{p+2}. Per sequence the drafter keeps `exact`: MTP positions
// below it are in its KV, fed with the target's own hidden states (valid forever: those tokens
// are known and h_p depends only on tokens 0..p); and the target's hidden rows from `exact` on,
// copied after each target forward. A call feeds positions exact .. len-2 (the last one again
// every call: its logits give the first draft), then chains: the draft at len+j-1 comes from
// MTP position len-2+j with the previous draft as token and the MTP layer's own output at
// len-3+j as hidden state. Those chained positions are beyond `exact`, so the next call's
// catch-up rewrites them: that is the rollback.
//
// A sequence whose first computed position is not 0 (a prefix-cache hit) starts its MTP
// positions there: MTP attention is rotary, so shifting positions by the same amount changes
// nothing but the missing context before it (the drafts are approximate there, outputs are not).
#include "deepinfer/engine/speculative/mtp_drafter.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "deepinfer/base/check.h"
#include "deepinfer/base/log.h"
#include "deepinfer/engine/batch_builder.h"
#include "deepinfer/engine/runner_io.h"
#include "deepinfer/engine/speculative/draft_kv_blocks.h"
#include "deepinfer/engine/speculative/greedy_draft.h"
#include "deepinfer/engine/speculative/speculator.h"
#include "deepinfer/model/mtp_head.h"

namespace deepinfer::engine::speculative {
namespace {

struct MtpOptions {
  DraftTarget target;
  int num_blocks = 0;
  DType kv_dtype = DType::kF32;
  int max_batch_tokens = 512;  // most catch-up tokens per MTP forward (prompts are chunked)
};

class MtpDrafter final : public Drafter {
 public:
  MtpDrafter(model::MtpHead& head, const MtpOptions& o)
      : head_(head),
        o_(o),
        hidden_size_(head.mtp_hidden_size()),
        blocks_(o.num_blocks, o.target.block_size) {
    model::KvCacheSpec spec = head.mtp_kv_cache_spec();
    spec.dtype = o.kv_dtype;
    // A window-state MTP layer (DeepSeek-V4's) keeps its rows in recent slabs: one per block,
    // the same index, so every row the drafter wrote stays readable.
    hybrid_ = spec.has_recent();
    kv_ = model::KvCache::allocate(spec, o.num_blocks, o.target.block_size,
                                   hybrid_ ? o.num_blocks : 0);
    head_.set_keep_final_hidden(true);
  }
  ~MtpDrafter() override { head_.set_keep_final_hidden(false); }

  std::vector<Draft> propose(std::span<const DraftInput> seqs) override;
  void target_computed(std::span<const ComputedSpan> spans) override;
  void forget(int64_t seq_id) override {
    blocks_.release(seq_id);
    states_.erase(seq_id);
  }
  std::string_view name() const override { return "mtp"; }

 private:
  struct SeqState {
    int origin = 0;  // first position with a target hidden state (MTP position 0)
    int exact = 0;   // absolute positions below: in the MTP KV from the target's hidden states
    std::vector<float>
        hidden;  // [positions exact.., hidden] the target's, copied after its forwards
  };
  struct Work {
    size_t out = 0;  // index into the call's drafts
    int64_t seq_id = 0;
    SeqState* state = nullptr;
    std::span<const int32_t> tokens;
    int want = 0;
    int next = 0;                // next absolute MTP position to feed
    std::vector<float> chained;  // [hidden] the MTP layer's output at next - 1
    bool done = false;
  };

  int64_t rows_held(const SeqState& st) const {
    return static_cast<int64_t>(st.hidden.size()) / hidden_size_;
  }
  bool run(const RunnerInput& in, const std::vector<float>& prev_hidden);
  void take_draft(Work& w, std::vector<Draft>& out, size_t logits_row, int64_t hidden_row);
  bool catch_up(std::vector<Work>& work, std::vector<Draft>& out);
  bool chain(std::vector<Work>& work, std::vector<Draft>& out);

  model::MtpHead& head_;
  MtpOptions o_;
  int64_t hidden_size_;
  DraftKvBlocks blocks_;
  model::KvCache kv_;
  std::unordered_map<int64_t, SeqState> states_;
  std::vector<float> logits_;      // [rows, vocab] of the last MTP forward
  std::vector<float> hidden_out_;  // [tokens, hidden] of the last MTP forward
  std::vector<int32_t> last_row_;  // [seqs] each sequence's last token row in it
  bool hybrid_ = false;  // the MTP KV has recent slabs (RunnerSeq::recent_slabs = its blocks)
  bool warned_ = false;
};

void MtpDrafter::target_computed(std::span<const ComputedSpan> spans) {
  const std::vector<float>& h = head_.final_hidden();
  const int64_t H = hidden_size_;
  for (const ComputedSpan& s : spans) {
    DI_CHECK(static_cast<int64_t>(s.row + s.num_tokens) * H <= static_cast<int64_t>(h.size()),
             "MTP drafter: rows {}+{} beyond the target's {} hidden rows", s.row, s.num_tokens,
             h.size() / static_cast<size_t>(H));
    auto it = states_.find(s.seq_id);
    // A first sight, or a gap after the rows held (the sequence was evicted here): start there.
    if (it == states_.end() || s.first_position > it->second.exact + rows_held(it->second)) {
      forget(s.seq_id);
      it = states_.emplace(s.seq_id, SeqState{s.first_position, s.first_position, {}}).first;
    }
    SeqState& st = it->second;
    const int from = std::max(s.first_position, st.exact);  // rows below exact are fed already
    const int to = s.first_position + s.num_tokens;
    if (to <= from) continue;
    const size_t need = static_cast<size_t>((to - st.exact) * H);
    if (st.hidden.size() < need) st.hidden.resize(need);
    std::memcpy(st.hidden.data() + static_cast<size_t>(from - st.exact) * H,
                h.data() + static_cast<size_t>(s.row + from - s.first_position) * H,
                sizeof(float) * static_cast<size_t>((to - from) * H));
  }
}

bool MtpDrafter::run(const RunnerInput& in, const std::vector<float>& prev_hidden) {
  BatchInputs b = build_forward_batch(in, o_.target.block_size);
  b.batch.slot_mapping = std::move(b.slot_mapping);
  const size_t vocab = static_cast<size_t>(o_.target.config->vocab_size);
  logits_.resize(b.batch.logits_rows.size() * vocab);
  hidden_out_.resize(static_cast<size_t>(b.batch.num_tokens() * hidden_size_));
  last_row_.clear();
  for (int s = 0; s < b.batch.num_seqs(); ++s)
    last_row_.push_back(b.batch.seq_token_start[s + 1] - 1);
  model::ForwardContext ctx{o_.target.pool, o_.target.batch_invariant, o_.target.int8_activations};
  Status st =
      head_.mtp_forward(b.batch, prev_hidden.data(), kv_, ctx, logits_.data(), hidden_out_.data());
  if (!st.is_ok()) {
    if (!warned_) log::warn("MTP drafter: {}; no drafts from it this step", st.message());
    warned_ = true;
  }
  return st.is_ok();
}

void MtpDrafter::take_draft(Work& w, std::vector<Draft>& out, size_t logits_row,
                            int64_t hidden_row) {
  const int32_t vocab = static_cast<int32_t>(o_.target.config->vocab_size);
  const GreedyDraft a =
      greedy_draft(logits_.data() + logits_row * static_cast<size_t>(vocab), vocab);
  Draft& d = out[w.out];
  if (a.token < 0) {
    w.done = true;
    return;
  }
  d.tokens.push_back(a.token);
  d.signals.push_back(signal_of(a.prob));
  const float* h = hidden_out_.data() + hidden_row * hidden_size_;
  w.chained.assign(h, h + hidden_size_);
  const auto& end = o_.target.end_tokens;
  if (static_cast<int>(d.tokens.size()) >= w.want ||
      std::find(end.begin(), end.end(), a.token) != end.end())
    w.done = true;
}

// Feeds MTP positions exact .. len-2 of every sequence (chunked under max_batch_tokens per
// forward); the forward that feeds a sequence's position len-2 gives its first draft.
bool MtpDrafter::catch_up(std::vector<Work>& work, std::vector<Draft>& out) {
  const int64_t H = hidden_size_;
  for (;;) {
    RunnerInput in;
    std::vector<float> prev;
    std::vector<Work*> finishing;
    int budget = o_.max_batch_tokens;
    for (Work& w : work) {
      SeqState& st = *w.state;
      const int last = static_cast<int>(w.tokens.size()) - 2;
      if (w.next > last) continue;
      const int left = last + 1 - w.next;
      const int n = std::min(left, std::max(1, budget));
      budget -= n;
      RunnerSeq& r = in.seqs.emplace_back();
      r.seq_id = w.seq_id;
      r.first_position = w.next - st.origin;
      r.token_ids.assign(w.tokens.begin() + w.next + 1, w.tokens.begin() + w.next + 1 + n);
      r.block_table = blocks_.table(w.seq_id, r.first_position + n);
      if (hybrid_) r.recent_slabs = r.block_table;
      r.samples = n == left;
      const float* h = st.hidden.data() + static_cast<size_t>(w.next - st.exact) * H;
      prev.insert(prev.end(), h, h + n * H);
      w.next += n;
      finishing.push_back(n == left ? &w : nullptr);
    }
    if (in.seqs.empty()) return true;
    if (!run(in, prev)) return false;
    size_t logits_row = 0;
    for (size_t i = 0; i < finishing.size(); ++i) {
      if (finishing[i] == nullptr) continue;
      take_draft(*finishing[i], out, logits_row++, last_row_[i]);
    }
  }
}

// One MTP forward per further draft position, one token per sequence still drafting.
bool MtpDrafter::chain(std::vector<Work>& work, std::vector<Draft>& out) {
  for (;;) {
    RunnerInput in;
    std::vector<float> prev;
    std::vector<Work*> rows;
    for (Work& w : work) {
      if (w.done || out[w.out].tokens.empty()) continue;
      RunnerSeq& r = in.seqs.emplace_back();
      r.seq_id = w.seq_id;
      r.first_position = w.next - w.state->origin;
      r.token_ids = {out[w.out].tokens.back()};
      r.block_table = blocks_.table(w.seq_id, r.first_position + 1);
      if (hybrid_) r.recent_slabs = r.block_table;
      r.samples = true;
      prev.insert(prev.end(), w.chained.begin(), w.chained.end());
      ++w.next;
      rows.push_back(&w);
    }
    if (in.seqs.empty()) return true;
    if (!run(in, prev)) return false;
    for (size_t i = 0; i < rows.size(); ++i) take_draft(*rows[i], out, i, last_row_[i]);
  }
}

std::vector<Draft> MtpDrafter::propose(std::span<const DraftInput> seqs) {
  std::vector<Draft> out(seqs.size());
  std::vector<Work> work;
  blocks_.begin_call();
  const int max_position = static_cast<int>(o_.target.config->max_position);
  const int64_t H = hidden_size_;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const DraftInput& s = seqs[i];
    const int len = static_cast<int>(s.tokens.size());
    const int want = std::min(s.max_tokens, max_position - len);
    auto it = states_.find(s.seq_id);
    if (want <= 0 || it == states_.end()) continue;
    SeqState& st = it->second;
    // The target's hidden states must reach position len - 2 (the last computed one).
    const int last = len - 2;
    if (last < st.origin || st.exact > last || st.exact + rows_held(st) <= last) continue;
    blocks_.touch(s.seq_id);
    // MTP positions origin .. last + want - 1 (the chained drafts' KV too).
    if (!blocks_.reserve(s.seq_id, last + want - st.origin,
                         [this](int64_t victim) { forget(victim); }))
      continue;
    work.push_back({i, s.seq_id, &st, s.tokens, want, st.exact, {}, false});
  }
  if (work.empty()) return out;
  bool ok = catch_up(work, out);
  for (Work& w : work) {
    // Positions below len - 2 are in the KV for good; len - 2 is fed again next call (its
    // logits give that call's first draft), and so are the chained positions after it.
    SeqState& st = *w.state;
    const int keep = static_cast<int>(w.tokens.size()) - 2;
    st.hidden.erase(st.hidden.begin(),
                    st.hidden.begin() + static_cast<std::ptrdiff_t>((keep - st.exact) * H));
    st.hidden.resize(static_cast<size_t>(H));  // rows after len - 2 were rejected drafts'
    st.exact = keep;
  }
  if (ok) ok = chain(work, out);
  if (!ok) {
    // What the failed forward wrote is unknown: these sequences start over at their next
    // target forward.
    for (Work& w : work) {
      out[w.out] = Draft{};
      forget(w.seq_id);
    }
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Drafter>> make_mtp_drafter(model::Model& target,
                                                  const DraftTarget& options) {
  const model::ModelConfig& mc = target.config();
  auto* head = dynamic_cast<model::MtpHead*>(&target);
  if (head == nullptr)
    return unsupported(
        "--speculative mtp: the model {} ({}) has no multi-token-prediction head the MTP drafter "
        "can use (built for deepseek_v3 and deepseek_v4); use --speculative ngram or draft",
        mc.name, mc.architecture);
  if (!head->has_mtp())
    return unsupported(
        "--speculative mtp: the model {} has no MTP layer (num_nextn_predict_layers is 0, or the "
        "checkpoint was converted without it); use --speculative ngram or draft",
        mc.name);
  MtpOptions o;
  o.target = options;
  model::KvCacheSpec spec = head->mtp_kv_cache_spec();
  DI_ASSIGN_OR_RETURN(o.kv_dtype,
                      model::resolve_kv_cache_dtype(options.kv_cache_dtype, spec, mc.architecture));
  // As many positions as the target's pool, plus a block per sequence for the chained drafts.
  const int per_seq = (kMaxDraftTokens + options.block_size - 1) / options.block_size;
  o.num_blocks = options.num_kv_blocks + options.max_num_seqs * per_seq;
  return std::unique_ptr<Drafter>(std::make_unique<MtpDrafter>(*head, o));
}

}  // namespace deepinfer::engine::speculative
