#include "deepinfer/engine/engine.h"

#include <algorithm>
#include <cstring>

#include "deepinfer/base/check.h"
#include "deepinfer/base/timer.h"
#include "deepinfer/engine/batch_builder.h"
#include "deepinfer/engine/grammar/grammar_matcher.h"
#include "deepinfer/engine/grammar/vocabulary_from_tokenizer.h"
#include "deepinfer/engine/sampler.h"
#include "deepinfer/engine/stop_checker.h"

namespace deepinfer::engine {

struct Engine::RequestState {
  int64_t id = 0;
  GenerationRequest request;
  recipe::StreamingDetokenizer detok;
  StopChecker stops;
  std::vector<int32_t> history;  // prompt + generated, for penalties
  std::shared_future<grammar::CompileResult> grammar_future;
  std::unique_ptr<grammar::GrammarMatcher> matcher;
  explicit RequestState(const recipe::Tokenizer& tok, std::vector<std::string> stop_strings)
      : detok(tok), stops(std::move(stop_strings)) {}
};

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(std::unique_ptr<model::Model> model,
                                               std::shared_ptr<const recipe::Tokenizer> tokenizer,
                                               const EngineConfig& config) {
  if (config.block_size <= 0 || config.max_num_seqs <= 0 || config.max_num_batched_tokens <= 0)
    return invalid_argument("engine: block_size, max_num_seqs and max_num_batched_tokens must be > 0");
  std::unique_ptr<Engine> e(new Engine());
  e->config_ = config;
  e->model_ = std::move(model);
  e->tokenizer_ = std::move(tokenizer);
  e->pool_ = std::make_unique<ThreadPool>(config.num_threads);
  const model::KvCacheSpec spec = e->model_->kv_cache_spec();
  const size_t per_block = size_t(config.block_size) * spec.num_layers * spec.num_kv_heads *
                           (spec.head_dim + spec.v_head_dim) * sizeof(float);
  const int num_blocks = static_cast<int>(std::max<size_t>(config.kv_cache_bytes / per_block, 16));
  e->kv_storage_ = model::KvCache::allocate(spec, num_blocks, config.block_size);
  KvCacheConfig kv;
  kv.num_blocks = num_blocks;
  kv.block_size = config.block_size;
  kv.enable_prefix_caching = config.enable_prefix_caching;
  kv.cache_namespace = config.kv_store_namespace.empty()
                           ? e->model_->config().name + "/" + e->model_->config().architecture
                           : config.kv_store_namespace;
  DI_RETURN_IF_ERROR(validate(kv));
  KvTierHook* hook = nullptr;
  if (!config.kv_store_dirs.empty()) {
    KvStoreTierOptions to;
    to.dirs = config.kv_store_dirs;
    to.model_namespace = kv.cache_namespace;
    DI_ASSIGN_OR_RETURN(e->kv_tier_, make_kv_store_tier(to, e->kv_storage_));
    hook = e->kv_tier_.get();
  }
  e->kv_manager_ = std::make_unique<KvCacheManager>(kv, hook);
  SchedulerConfig sc;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_num_batched_tokens = config.max_num_batched_tokens;
  DI_RETURN_IF_ERROR(validate(sc));
  e->scheduler_ = std::make_unique<Scheduler>(sc, *e->kv_manager_);
  return e;
}

Result<int64_t> Engine::add_request(const GenerationRequest& request) {
  const auto& mc = model_->config();
  if (request.prompt_ids.empty()) return invalid_argument("the prompt is empty");
  for (int32_t t : request.prompt_ids)
    if (t < 0 || t >= mc.vocab_size)
      return invalid_argument("prompt token id {} is outside the vocabulary (size {})", t, mc.vocab_size);
  if (request.max_tokens < 0) return invalid_argument("max_tokens must be >= 0, got {}", request.max_tokens);
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_ids.size());
  if (prompt_len >= mc.max_position)
    return invalid_argument("the prompt has {} tokens but the model's context is {}", prompt_len,
                            mc.max_position);
  DI_RETURN_IF_ERROR(validate_sampling_params(request.sampling, static_cast<int32_t>(mc.vocab_size)));
  for (const auto& s : request.stop)
    if (s.empty()) return invalid_argument("stop strings must not be empty");

  const int64_t id = next_id_++;
  auto state = std::make_unique<RequestState>(*tokenizer_, request.stop);
  state->id = id;
  state->request = request;
  state->history = request.prompt_ids;
  if (!state->request.sampling.has_seed) {
    // Unseeded requests still draw from the counter-based generator, keyed by their id.
    state->request.sampling.seed = static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull;
  }

  Sequence seq;
  seq.id = id;
  seq.request_key = id;
  seq.prompt = request.prompt_ids;
  seq.max_tokens = static_cast<int>(std::min<int64_t>(request.max_tokens, mc.max_position - prompt_len));
  seq.eos_token_ids = tokenizer_->eos_ids();
  seq.ignore_eos = request.ignore_eos;
  if (seq.max_tokens == 0) {
    // Nothing to generate: answer at once without touching the model.
    requests_[id] = std::move(state);
    pending_empty_.push_back(id);
    return id;
  }
  if (request.grammar) {
    if (!grammar_compiler_) {
      auto vocab = std::make_shared<const grammar::TokenVocabulary>(
          grammar::vocabulary_from_tokenizer(*tokenizer_));
      grammar_compiler_ = std::make_unique<grammar::GrammarCompiler>(std::move(vocab), 1);
    }
    state->grammar_future = grammar_compiler_->compile_async(*request.grammar);
    requests_[id] = std::move(state);
    pending_grammar_.emplace_back(id, std::move(seq));
    return id;
  }
  DI_RETURN_IF_ERROR(scheduler_->add(std::move(seq)));
  requests_[id] = std::move(state);
  return id;
}

void Engine::abort(int64_t request_id) {
  (void)scheduler_->abort(request_id);
  std::erase_if(pending_grammar_, [&](const auto& p) { return p.first == request_id; });
  requests_.erase(request_id);
}

void Engine::flush_kv_store() {
  if (kv_tier_) kv_tier_->flush();
}

bool Engine::has_unfinished() const {
  return scheduler_->has_unfinished() || !pending_grammar_.empty() || !pending_empty_.empty();
}

void Engine::admit_compiled_grammars(std::vector<RequestOutput>& outputs) {
  // Wait only when nothing else can run, so compiles overlap with other requests' steps.
  const bool idle = !scheduler_->has_unfinished();
  for (size_t i = 0; i < pending_grammar_.size();) {
    auto& [id, seq] = pending_grammar_[i];
    RequestState& r = *requests_.at(id);
    if (!idle && r.grammar_future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++i;
      continue;
    }
    const grammar::CompileResult& compiled = r.grammar_future.get();
    Status st = compiled.is_ok() ? scheduler_->add(std::move(seq)) : compiled.status();
    if (st.is_ok()) {
      r.matcher = std::make_unique<grammar::GrammarMatcher>(*compiled);
    } else {
      RequestOutput out;
      out.request_id = id;
      out.finished = true;
      out.finish_reason = FinishReason::kAbort;
      out.error = st.message();
      out.prompt_tokens = static_cast<int>(r.request.prompt_ids.size());
      outputs.push_back(std::move(out));
      requests_.erase(id);
    }
    pending_grammar_.erase(pending_grammar_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> outputs;
  for (int64_t id : pending_empty_) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    RequestOutput out;
    out.request_id = id;
    out.finished = true;
    out.finish_reason = FinishReason::kLength;
    out.prompt_tokens = static_cast<int>(it->second->request.prompt_ids.size());
    outputs.push_back(std::move(out));
    requests_.erase(it);
  }
  pending_empty_.clear();
  if (!pending_grammar_.empty()) admit_compiled_grammars(outputs);

  ScheduleOutput sched = scheduler_->schedule();
  if (sched.empty()) return outputs;
  ++stats_.steps;
  BatchInputs inputs = build_forward_batch(
      sched, [this](int64_t id) { return scheduler_->get(id); }, config_.block_size);
  inputs.batch.slot_mapping = std::move(inputs.slot_mapping);
  const int64_t vocab = model_->config().vocab_size;
  logits_.resize(inputs.batch.logits_rows.size() * static_cast<size_t>(vocab));
  model::ForwardContext ctx{pool_.get(), config_.batch_invariant, config_.int8_activations};
  const double t0 = now_seconds();
  Status st = model_->forward(inputs.batch, kv_storage_, ctx, logits_.data());
  const double t1 = now_seconds();
  stats_.forward_seconds += t1 - t0;
  if (!st.is_ok()) {
    // A failed forward ends the requests in this batch with the error; others are unaffected.
    for (const ScheduledSeq& s : sched.seqs) {
      RequestOutput out;
      out.request_id = s.seq_id;
      out.finished = true;
      out.finish_reason = FinishReason::kAbort;
      out.error = st.message();
      outputs.push_back(std::move(out));
      abort(s.seq_id);
    }
    return outputs;
  }

  StepOutput step_out;
  std::map<int64_t, RequestOutput> by_id;
  int row = 0;
  for (const ScheduledSeq& s : sched.seqs) {
    if (!s.samples) continue;
    RequestState& r = *requests_.at(s.seq_id);
    const Sequence* seq = scheduler_->get(s.seq_id);
    const uint64_t step_index = seq ? seq->output.size() : 0;
    const uint32_t* mask = nullptr;
    if (r.matcher) {
      // The model's vocabulary may be padded beyond the tokenizer's: those ids stay masked.
      mask_.assign(static_cast<size_t>((vocab + 31) / 32), 0u);
      r.matcher->fill_next_token_bitmask(mask_.data());
      mask = mask_.data();
    }
    SampleResult res = sample(logits_.data() + size_t(row) * vocab, static_cast<int32_t>(vocab),
                              r.request.sampling, SamplerState{r.history, r.request.prompt_ids.size()},
                              static_cast<uint64_t>(s.seq_id), step_index, mask);
    ++row;
    if (res.token < 0) {
      // Nothing allowed (a grammar dead end, or every logit masked by bias): end with EOS.
      res.token = tokenizer_->eos_id();
      res.logprob = 0;
    }
    if (r.matcher && !r.matcher->accept_token(res.token)) res.token = tokenizer_->eos_id();
    step_out.sampled.push_back(res.token);
    r.history.push_back(res.token);
    RequestOutput& out = by_id[s.seq_id];
    out.request_id = s.seq_id;
    out.new_token_ids.push_back(res.token);
    if (r.request.sampling.logprobs >= 0) {
      LogprobEntry e{res.token, res.logprob, {}};
      for (const auto& t : res.top_logprobs) e.top.emplace_back(t.token, t.logprob);
      out.new_logprobs.push_back(std::move(e));
    }
  }
  stats_.sample_seconds += now_seconds() - t1;

  std::vector<FinishedSeq> finished = scheduler_->update(sched, step_out);
  std::map<int64_t, FinishReason> ended;
  for (const auto& f : finished) ended[f.seq_id] = f.reason;

  const auto& eos = tokenizer_->eos_ids();
  for (auto& [id, out] : by_id) {
    RequestState& r = *requests_.at(id);
    auto e = ended.find(id);
    const bool eos_stop = e != ended.end() && e->second == FinishReason::kStop;
    // The EOS token that ended a sequence is not part of its text.
    for (int32_t t : out.new_token_ids) {
      if (eos_stop && std::find(eos.begin(), eos.end(), t) != eos.end()) continue;
      r.stops.push(r.detok.push(t));
    }
    const bool stop_hit = r.stops.matched();
    const bool done = e != ended.end() || stop_hit;
    if (done) r.stops.push(r.detok.finish());
    out.new_text += r.stops.release(done);
    if (stop_hit && e == ended.end()) {
      if (auto f = scheduler_->finish(id, FinishReason::kStop)) finished.push_back(std::move(*f));
    }
  }
  for (const auto& f : finished) {
    RequestOutput& out = by_id[f.seq_id];
    out.request_id = f.seq_id;
    out.finished = true;
    out.finish_reason = f.reason;
    out.prompt_tokens = f.num_prompt_tokens;
    out.completion_tokens = static_cast<int>(f.output.size());
    out.cached_tokens = f.num_cached_tokens;
    stats_.prompt_tokens += f.num_prompt_tokens;
    stats_.cached_prompt_tokens += f.num_cached_tokens;
    stats_.generated_tokens += static_cast<int64_t>(f.output.size());
    requests_.erase(f.seq_id);
  }
  for (auto& [id, out] : by_id) outputs.push_back(std::move(out));
  return outputs;
}

}  // namespace deepinfer::engine
