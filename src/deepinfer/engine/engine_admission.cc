// Request admission: validating a request, turning it into a scheduled sequence (or a pending
// grammar compile, or an immediate empty answer), and aborting one.
#include <chrono>

#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/engine_state.h"
#include "deepinfer/engine/grammar_vocabulary.h"
#include "deepinfer/engine/prompt_images.h"

namespace deepinfer::engine {

Status validate_generation_request(const GenerationRequest& request, const model::ModelConfig& mc) {
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
  if (request.prompt_logprobs < -1 || request.prompt_logprobs > 20)
    return invalid_argument("prompt_logprobs must be in [0, 20] (or -1 for off), got {}", request.prompt_logprobs);
  return Status::ok();
}

Result<int64_t> Engine::add_request(const GenerationRequest& request) {
  if (!has_unfinished()) last_forward_end_ = 0;  // the gap since the last forward was not idling
  const auto& mc = runner_->model_config();
  DI_RETURN_IF_ERROR(validate_generation_request(request, mc));
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_ids.size());

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
  seq.skip_prefix_cache = request.prompt_logprobs >= 0;
  seq.kv_export_tag = request.kv_export_tag;
  if (!request.images.empty() && request.prompt_logprobs >= 0)
    return invalid_argument("prompt logprobs are not available for prompts with images");
  if (!request.images.empty()) DI_RETURN_IF_ERROR(attach_images(request.images, mc.hidden_size, seq));
  seq.traffic_class = request.traffic_class.value_or(config_.default_traffic_class);
  seq.allow_bounded_replay =
      request.swa_restore.value_or(config_.default_swa_restore) == SwaRestore::kBounded;
  if (seq.max_tokens == 0) {
    // Nothing to generate: answer at once without touching the model.
    requests_[id] = std::move(state);
    pending_empty_.push_back(id);
    return id;
  }
  if (request.grammar) {
    state->grammar_future = grammar_compiler().compile_async(*request.grammar);
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
  if (speculator_) speculator_->forget(request_id);  // a draft model's KV of it
  std::erase_if(pending_grammar_, [&](const auto& p) { return p.first == request_id; });
  requests_.erase(request_id);
}

structured::GrammarCompiler& Engine::grammar_compiler() {
  if (!grammar_compiler_) {
    auto vocab = std::make_shared<const structured::TokenVocabulary>(
        vocabulary_from_tokenizer(*tokenizer_));
    grammar_compiler_ = std::make_unique<structured::GrammarCompiler>(std::move(vocab), 1);
  }
  return *grammar_compiler_;
}

Status Engine::check_grammar(const structured::GrammarSpec& spec) {
  const structured::CompileResult& r = grammar_compiler().compile_async(spec).get();
  return r.is_ok() ? Status::ok() : r.status();
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
    const structured::CompileResult& compiled = r.grammar_future.get();
    Status st = compiled.is_ok() ? scheduler_->add(std::move(seq)) : compiled.status();
    if (st.is_ok()) {
      r.matcher = std::make_unique<structured::GrammarMatcher>(*compiled);
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

void Engine::answer_empty_requests(std::vector<RequestOutput>& outputs) {
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
}

}  // namespace deepinfer::engine
