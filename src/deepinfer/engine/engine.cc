// The engine's step loop: schedule, build the runner input, forward, sample, update the
// scheduler and detokenize (with overlap: the next step's forward runs during this one's update).
#include "deepinfer/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "deepinfer/base/check.h"
#include "deepinfer/base/log.h"
#include "deepinfer/base/timer.h"
#include "deepinfer/engine/batch_builder.h"
#include "deepinfer/engine/engine_state.h"
#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/grammar_matcher.h"
#include "deepinfer/engine/step_worker.h"
#include "deepinfer/engine/stop_checker.h"

namespace deepinfer::engine {

Engine::Engine() = default;
Engine::~Engine() = default;

Status Engine::set_kv_export_sink(KvExportSink* sink, bool by_layer) {
  if (!kv_tier_) return invalid_argument("exporting KV blocks needs a KV store tier (kv_store_ram_only)");
  kv_tier_->set_export_sink(sink, by_layer);
  return Status::ok();
}

int Engine::reset_prefix_cache() { return kv_manager_->reset_prefix_cache(); }

void Engine::flush_kv_store() {
  if (kv_tier_) kv_tier_->flush();
}

bool Engine::has_unfinished() const {
  return scheduler_->has_unfinished() || !pending_grammar_.empty() || !pending_empty_.empty() ||
         next_ || unprocessed_;
}

void Engine::propose_drafts() {
  // Sequences decoding with nothing in flight; their history is the prompt then the output.
  std::vector<speculative::DraftRequest> reqs;
  for (int64_t id : scheduler_->running()) {
    const Sequence* seq = scheduler_->get(id);
    auto it = requests_.find(id);
    if (seq == nullptr || it == requests_.end() || !it->second->request.speculative) continue;
    if (seq->num_inflight_tokens != 0 || seq->num_computed_tokens != seq->num_tokens() - 1) continue;
    reqs.push_back({id, it->second->history,
                    seq->max_tokens - static_cast<int>(seq->output.size()) - 1});
  }
  if (reqs.empty()) return;
  std::vector<std::vector<int32_t>> drafts = speculator_->propose(reqs, scheduler_->num_running());
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::vector<int32_t>& d = drafts[i];
    // Only vocabulary ids go to the forward (a history never holds others today; a drafter
    // reading a prompt's image placeholders would).
    const int32_t vocab = runner_->vocab_size();
    const auto bad = std::find_if(d.begin(), d.end(), [&](int32_t t) { return t < 0 || t >= vocab; });
    if (bad != d.end()) {
      d.erase(bad, d.end());
      speculator_->cut(reqs[i].seq_id, static_cast<int>(d.size()));
    }
    if (const auto& matcher = requests_.at(reqs[i].seq_id)->matcher; matcher && !d.empty()) {
      // Drafts the grammar forbids are cut here, before they cost a forward.
      size_t ok = 0;
      while (ok < d.size() && matcher->accept_token(d[ok])) ++ok;
      matcher->rollback(static_cast<int>(ok));
      d.resize(ok);
      speculator_->cut(reqs[i].seq_id, static_cast<int>(ok));
    }
    scheduler_->set_draft(reqs[i].seq_id, std::move(d));
  }
}

void Engine::check_drafts(const RequestState& r, DraftCheck& check) {
  if (!r.matcher) return;
  // The mask at the position after each draft: the matcher walks the drafts, then steps back.
  const int32_t vocab = runner_->vocab_size();
  size_t ok = 0;
  for (; ok < check.tokens.size() && r.matcher->accept_token(check.tokens[ok]); ++ok) {
    auto& mask = check.allowed_masks.emplace_back(static_cast<size_t>((vocab + 31) / 32), 0u);
    r.matcher->fill_next_token_bitmask(mask.data());
  }
  r.matcher->rollback(static_cast<int>(ok));
  check.tokens.resize(ok);
}

std::unique_ptr<Engine::Prepared> Engine::prepare_step() {
  if (speculator_) propose_drafts();
  ScheduleOutput sched = scheduler_->schedule();
  if (sched.empty()) return nullptr;
  auto p = std::make_unique<Prepared>();
  p->input = make_runner_input(
      sched, [this](int64_t id) { return scheduler_->get(id); }, config_.block_size,
      kv_manager_->recent_slabs().slab_of_block(), runner_->kv_cache().spec.token_history);
  for (RunnerSeq& rs : p->input.seqs) {
    // Prompt logprobs: score the token after each prompt position of this chunk but the last.
    auto it = requests_.find(rs.seq_id);
    if (it == requests_.end() || it->second->request.prompt_logprobs < 0) continue;
    const auto& prompt = it->second->request.prompt_ids;
    const int end = std::min(rs.first_position + rs.num_new_tokens(), static_cast<int>(prompt.size()) - 1);
    for (int pos = rs.first_position; pos < end; ++pos) rs.score_tokens.push_back(prompt[static_cast<size_t>(pos) + 1]);
    rs.score_top_n = it->second->request.prompt_logprobs;
  }
  if (kv_tier_) p->input.after_layer = layer_export_for(sched);
  p->sched = std::move(sched);
  return p;
}

std::function<void(int)> Engine::layer_export_for(const ScheduleOutput& sched) {
  std::vector<Sequence*> completing;  // sequences with an export tag whose prompt this step completes
  for (const ScheduledSeq& s : sched.seqs) {
    Sequence* seq = scheduler_->get_mutable(s.seq_id);
    if (seq == nullptr || seq->kv_export_tag.empty()) continue;
    const int prompt = seq->num_prompt_tokens();
    if (s.first_position < prompt && s.first_position + s.num_new_tokens >= prompt) completing.push_back(seq);
  }
  return completing.empty() ? nullptr : kv_tier_->layer_exporter(completing);
}

Status Engine::run_forward(Prepared& p) {
  ++stats_.steps;
  const double t0 = now_seconds();
  if (last_forward_end_ > 0) stats_.idle_seconds += t0 - last_forward_end_;
  Status st = runner_->execute(p.input);
  last_forward_end_ = now_seconds();
  stats_.forward_seconds += last_forward_end_ - t0;
  if (speculator_ && st.is_ok()) {
    int drafts = 0;
    for (const ScheduledSeq& s : p.sched.seqs) drafts += static_cast<int>(s.draft_tokens.size());
    speculator_->observe_forward(p.sched.total_tokens, drafts, last_forward_end_ - t0);
    // The batch's rows are its sequences' new tokens in input order; requests that opted out
    // of speculation are left out (a drafter keeps nothing for them).
    std::vector<speculative::ComputedSpan> spans;
    int row = 0;
    for (const RunnerSeq& s : p.input.seqs) {
      auto it = requests_.find(s.seq_id);
      if (it != requests_.end() && it->second->request.speculative)
        spans.push_back({s.seq_id, s.first_position, s.num_new_tokens(), row});
      row += s.num_new_tokens();
    }
    speculator_->target_computed(spans);
  }
  return st;
}

void Engine::fail_step(const ScheduleOutput& sched, const Status& st,
                       std::vector<RequestOutput>& outputs) {
  // A failed forward ends the requests in this batch with the error; others are unaffected.
  for (const ScheduledSeq& s : sched.seqs) {
    if (requests_.count(s.seq_id) == 0) continue;
    RequestOutput out;
    out.request_id = s.seq_id;
    out.finished = true;
    out.finish_reason = FinishReason::kAbort;
    out.error = st.message();
    outputs.push_back(std::move(out));
    abort(s.seq_id);
  }
}

void Engine::prepare_sampling(Prepared& p) {
  const double t0 = now_seconds();
  const int32_t vocab = runner_->vocab_size();
  p.sampling.rows.clear();
  for (const ScheduledSeq& s : p.sched.seqs) {
    if (!s.samples) continue;
    SamplingRow& row = p.sampling.rows.emplace_back();
    auto it = requests_.find(s.seq_id);
    // Ended (stop string, EOS, abort) or preempted after this step was scheduled: its token is
    // discarded without touching the request's history or grammar state.
    if (it == requests_.end() || !scheduler_->is_current(s)) {
      row.skip = true;
      continue;
    }
    const RequestState& r = *it->second;
    const SamplingParams& sp = r.request.sampling;
    row.params = sp;
    row.request_key = static_cast<uint64_t>(s.seq_id);
    // Index of the token drawn at the row's first position (drafts come after it).
    row.step = static_cast<uint64_t>(s.first_position + s.num_new_tokens - s.draft_tokens.size() -
                                     r.request.prompt_ids.size());
    if (sp.repetition_penalty != 1.0f || sp.frequency_penalty != 0.0f || sp.presence_penalty != 0.0f) {
      row.history = r.history;
      row.num_prompt = r.request.prompt_ids.size();
    }
    if (r.matcher) {
      // The model's vocabulary may be padded beyond the tokenizer's: those ids stay masked.
      row.allowed_mask.assign(static_cast<size_t>((vocab + 31) / 32), 0u);
      r.matcher->fill_next_token_bitmask(row.allowed_mask.data());
    }
    if (!s.draft_tokens.empty()) {
      row.draft.tokens = s.draft_tokens;
      check_drafts(r, row.draft);
    }
  }
  stats_.sample_seconds += now_seconds() - t0;
}

std::vector<SampledRow> Engine::take_accepted(int64_t seq_id, const SamplingRow& in, SampledRow& sr) {
  std::vector<SampledRow> accepted = std::move(sr.accepted);
  sr.accepted.clear();
  if (!speculator_ || in.draft.tokens.empty()) return accepted;
  speculator_->observe(seq_id, static_cast<int>(in.draft.tokens.size()), static_cast<int>(accepted.size()));
  RequestState& r = *requests_.at(seq_id);
  const Sequence* seq = scheduler_->get(seq_id);
  // Nothing after an end is output: an accepted EOS becomes the step's last token.
  for (size_t i = 0; i < accepted.size(); ++i) {
    const auto& eos = seq->eos_token_ids;
    if (seq->ignore_eos || std::find(eos.begin(), eos.end(), accepted[i].token) == eos.end()) continue;
    sr = std::move(accepted[i]);
    accepted.resize(i);
    break;
  }
  // The grammar masks allowed every accepted draft, so the matcher takes them.
  for (const SampledRow& a : accepted) {
    const bool taken = !r.matcher || r.matcher->accept_token(a.token);
    DI_CHECK(taken, "seq {}: accepted draft {} refused by its grammar", seq_id, a.token);
  }
  return accepted;
}

Engine::Sampled Engine::sample_step(Prepared&& p) {
  const double t0 = now_seconds();
  RunnerOutput ro = runner_->sample(p.sampling);
  Sampled res;
  for (ScoredTokens& sc : ro.scored) {
    auto it = requests_.find(sc.seq_id);
    if (it == requests_.end()) continue;
    RequestState& r = *it->second;
    if (!sc.error.empty()) {
      res.failed.emplace(sc.seq_id, Sampled::Failure{FinishReason::kAbort, std::move(sc.error)});
      continue;
    }
    for (size_t i = 0; i < sc.rows.size(); ++i) {
      if (sc.first_position + static_cast<int>(i) != r.prompt_scored) continue;  // a recompute
      LogprobEntry e{sc.rows[i].token, sc.rows[i].logprob, {}};
      for (const auto& t : sc.rows[i].top_logprobs) e.top.emplace_back(t.token, t.logprob);
      r.prompt_logprobs.push_back(std::move(e));
      ++r.prompt_scored;
    }
  }
  size_t row = 0;
  for (const ScheduledSeq& s : p.sched.seqs) {
    if (!s.samples) continue;
    const SamplingRow& in = p.sampling.rows[row];
    SampledRow& sr = ro.rows[row++];
    const size_t index = res.step.sampled.size();
    auto it = requests_.find(s.seq_id);
    if (in.skip || it == requests_.end()) {
      res.step.sampled.push_back(-1);
      continue;
    }
    RequestState& r = *it->second;
    if (res.failed.count(s.seq_id)) {
      res.step.sampled.push_back(-1);
      continue;
    }
    if (!sr.error.empty()) {  // e.g. non-finite logits: this request ends, the batch goes on
      res.step.sampled.push_back(-1);
      res.failed[s.seq_id] = {FinishReason::kAbort, std::move(sr.error)};
      continue;
    }
    std::vector<SampledRow> accepted = take_accepted(s.seq_id, in, sr);
    if (sr.token < 0) {
      // Nothing allowed (a grammar dead end, or every logit masked by bias): end with EOS.
      if (!in.allowed_mask.empty() &&
          std::all_of(in.allowed_mask.begin(), in.allowed_mask.end(), [](uint32_t w) { return w == 0; }))
        r.grammar_dead_end = true;
      sr.token = tokenizer_->eos_id();
      sr.logprob = 0;
    }
    if (sr.token >= 0 && r.matcher && !r.matcher->accept_token(sr.token)) {
      r.grammar_dead_end = true;  // the text so far is not known to be complete
      sr.token = tokenizer_->eos_id();
    }
    if (sr.token < 0) {  // ... and the tokenizer has no EOS to end it with
      res.step.sampled.push_back(-1);
      res.failed[s.seq_id] = {r.grammar_dead_end ? FinishReason::kGrammarDeadEnd : FinishReason::kAbort,
                              "no token is allowed here (every one is masked by the output format "
                              "or logit_bias) and the tokenizer has no end-of-sequence token"};
      continue;
    }
    res.step.sampled.push_back(sr.token);
    if (speculator_ && r.request.sampling.logprobs >= 0) speculator_->note_emitted(s.seq_id, sr.logprob);
    if (!accepted.empty()) {
      res.step.accepted.resize(index + 1);
      for (const SampledRow& a : accepted) res.step.accepted[index].push_back(a.token);
    }
    accepted.push_back(std::move(sr));  // the step's tokens in order: accepted drafts, then this
    RequestOutput& out = res.by_id[s.seq_id];
    out.request_id = s.seq_id;
    if (!r.prompt_logprobs.empty()) out.prompt_logprobs.swap(r.prompt_logprobs);
    for (SampledRow& t : accepted) {
      r.history.push_back(t.token);
      out.new_token_ids.push_back(t.token);
      if (r.request.sampling.logprobs < 0) continue;
      LogprobEntry e{t.token, t.logprob, {}};
      for (const auto& tl : t.top_logprobs) e.top.emplace_back(tl.token, tl.logprob);
      out.new_logprobs.push_back(std::move(e));
    }
  }
  if (!res.step.accepted.empty()) res.step.accepted.resize(res.step.sampled.size());
  res.sched = std::move(p.sched);
  stats_.sample_seconds += now_seconds() - t0;
  return res;
}

void Engine::process_step(Sampled&& s, std::vector<RequestOutput>& outputs) {
  // Requests the runner could not sample end first, so update() skips their entries.
  std::vector<FinishedSeq> finished;
  for (const auto& [id, f] : s.failed)
    if (auto fs = scheduler_->finish(id, f.reason)) finished.push_back(std::move(*fs));
  for (FinishedSeq& f : scheduler_->update(s.sched, s.step)) finished.push_back(std::move(f));
  std::map<int64_t, FinishReason> ended;
  for (const auto& f : finished) ended[f.seq_id] = f.reason;

  const auto& eos = tokenizer_->eos_ids();
  std::map<int64_t, int> dropped;  // speculative steps: tokens after a stop string's end
  for (auto it = s.by_id.begin(); it != s.by_id.end();) {
    auto rs = requests_.find(it->first);
    if (rs == requests_.end()) {  // aborted by the caller since it was sampled
      it = s.by_id.erase(it);
      continue;
    }
    const int64_t id = it->first;
    RequestOutput& out = it->second;
    RequestState& r = *rs->second;
    auto e = ended.find(id);
    const bool eos_stop = e != ended.end() && e->second == FinishReason::kStop;
    // The EOS token that ended a sequence is not part of its text.
    for (size_t i = 0; i < out.new_token_ids.size(); ++i) {
      const int32_t t = out.new_token_ids[i];
      if (eos_stop && std::find(eos.begin(), eos.end(), t) != eos.end()) continue;
      r.stops.push(r.detok.push(t));
      if (r.stops.matched() && i + 1 < out.new_token_ids.size()) {
        // Several tokens came in one step: those after the stop are not part of the output.
        dropped[id] = static_cast<int>(out.new_token_ids.size() - i - 1);
        out.new_token_ids.resize(i + 1);
        if (out.new_logprobs.size() > i + 1) out.new_logprobs.resize(i + 1);
        break;
      }
    }
    const bool stop_hit = r.stops.matched();
    const bool done = e != ended.end() || stop_hit;
    if (done) r.stops.push(r.detok.finish());
    out.new_text += r.stops.release(done);
    if (const Sequence* seq = scheduler_->get(id)) {  // known from the first output on (a stream's header)
      out.prompt_tokens = seq->num_prompt_tokens();
      out.cached_tokens = std::max(0, seq->num_cached_tokens);
      out.replayed_tokens = seq->num_replayed_tokens;
    }
    if (stop_hit && e == ended.end()) {
      // With overlap, its next token may already be in flight: finishing here frees its blocks
      // (no block is reused before that forward ends) and the token is discarded when sampled.
      if (auto f = scheduler_->finish(id, FinishReason::kStop)) finished.push_back(std::move(*f));
    }
    ++it;
  }
  for (const auto& f : finished) {
    RequestOutput& out = s.by_id[f.seq_id];
    out.request_id = f.seq_id;
    out.finished = true;
    out.finish_reason = f.reason;
    if (dropped.count(f.seq_id)) out.finish_reason = FinishReason::kStop;  // the stop came first
    if (auto rs = requests_.find(f.seq_id); rs != requests_.end() && rs->second->grammar_dead_end) {
      out.finish_reason = FinishReason::kGrammarDeadEnd;
      out.error = "the output format's grammar allows no next token here (a dead end): the text "
                  "is not a complete answer";
    }
    if (auto fail = s.failed.find(f.seq_id); fail != s.failed.end()) {
      out.finish_reason = fail->second.reason;
      out.error = fail->second.message;
    }
    out.prompt_tokens = f.num_prompt_tokens;
    out.completion_tokens = static_cast<int>(f.output.size()) - (dropped.count(f.seq_id) ? dropped[f.seq_id] : 0);
    out.cached_tokens = f.num_cached_tokens;
    out.replayed_tokens = f.num_replayed_tokens;
    stats_.prompt_tokens += f.num_prompt_tokens;
    stats_.cached_prompt_tokens += f.num_cached_tokens;
    stats_.generated_tokens += out.completion_tokens;
    if (speculator_) speculator_->forget(f.seq_id);
    requests_.erase(f.seq_id);
  }
  for (auto& [id, out] : s.by_id) outputs.push_back(std::move(out));
}

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> outputs;
  answer_empty_requests(outputs);
  if (!pending_grammar_.empty()) admit_compiled_grammars(outputs);
  if (overlap_) return step_overlapped(std::move(outputs));

  std::unique_ptr<Prepared> p = prepare_step();
  if (!p) {
    last_forward_end_ = 0;
    // Everything runnable waits on KV store reads: wait for one instead of spinning.
    if (kv_tier_ && scheduler_->num_prefetching() > 0 && outputs.empty())
      kv_tier_->wait_for_prefetch(std::chrono::milliseconds(5));
    return outputs;
  }
  Status st = run_forward(*p);
  if (!st.is_ok()) {
    fail_step(p->sched, st, outputs);
    return outputs;
  }
  prepare_sampling(*p);
  process_step(sample_step(std::move(*p)), outputs);
  return outputs;
}

std::vector<RequestOutput> Engine::step_overlapped(std::vector<RequestOutput> outputs) {
  // In steady state next_ was scheduled and built during the previous forward, with the
  // tokens that forward sampled written in after it.
  if (!next_) {
    // Nothing was scheduled during the last forward (all work was in flight, or the pool was
    // full): apply the last step first, so the new one has no tokens left to fill in.
    if (unprocessed_) {
      std::unique_ptr<Sampled> last = std::move(unprocessed_);
      process_step(std::move(*last), outputs);
    }
    next_ = prepare_step();
    if (!next_) {
      last_forward_end_ = 0;
      return outputs;
    }
  }
  std::unique_ptr<Prepared> current = std::move(next_);
  std::unique_ptr<Sampled> previous = std::move(unprocessed_);
  std::vector<RequestOutput> previous_outputs;
  std::unique_ptr<Prepared> following;
  // The worker touches the scheduler, KV bookkeeping, request states and grammar matchers; the
  // runner only the batch, the KV storage and the logits. No block freed during the forward is
  // written before the next forward, since without a KV store tier only forwards write KV.
  // The grammar masks of this step are filled last: the following step's schedule may have
  // preempted one of its sequences, which then samples nothing.
  worker_->start([&] {
    if (previous) process_step(std::move(*previous), previous_outputs);
    following = prepare_step();
    prepare_sampling(*current);
  });
  Status st = run_forward(*current);
  worker_->wait();
  for (auto& o : previous_outputs) outputs.push_back(std::move(o));
  std::unique_ptr<Sampled> sampled;
  if (st.is_ok()) {
    sampled = std::make_unique<Sampled>(sample_step(std::move(*current)));
  } else {
    fail_step(current->sched, st, outputs);
  }
  if (following) {
    // Write in the tokens this step just sampled. A sequence that ended meanwhile gets a
    // dummy token: its results are discarded and its freed blocks are not reused before then.
    for (RunnerSeq& rs : following->input.seqs) {
      for (int32_t& t : rs.token_ids) {
        if (t != Sequence::kPendingToken) continue;
        t = 0;
        if (sampled) {
          auto it = sampled->by_id.find(rs.seq_id);
          if (it != sampled->by_id.end() && !it->second.new_token_ids.empty())
            t = it->second.new_token_ids.back();
        }
      }
    }
    next_ = std::move(following);
  }
  unprocessed_ = std::move(sampled);
  return outputs;
}

}  // namespace deepinfer::engine
