// The engine's private per-request and per-step records, shared by its .cc files
// (engine.cc: the step loop; engine_create.cc; engine_admission.cc).
#pragma once

#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/stop_checker.h"
#include "deepinfer/recipe/tokenizer.h"
#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/grammar_matcher.h"

namespace deepinfer::engine {

struct Engine::RequestState {
  int64_t id = 0;
  GenerationRequest request;
  recipe::StreamingDetokenizer detok;
  StopChecker stops;
  std::vector<int32_t> history;  // prompt + generated, for penalties
  std::shared_future<structured::CompileResult> grammar_future;
  std::unique_ptr<structured::GrammarMatcher> matcher;
  bool grammar_dead_end = false;  // the grammar allowed no token: ends with an error
  int prompt_scored = 0;  // prompt positions whose next token's logprob is known (dedupes recomputes)
  std::vector<LogprobEntry> prompt_logprobs;  // scored, not yet sent
  explicit RequestState(const recipe::Tokenizer& tok, std::vector<std::string> stop_strings)
      : detok(tok), stops(std::move(stop_strings)) {}
};

struct Engine::Prepared {
  ScheduleOutput sched;
  RunnerInput input;       // what the runner computes (pending tokens filled in before it runs)
  SamplingInput sampling;  // how it samples; prepare_sampling() fills it once the step's
                           // sequences are known to be current (during the forward with overlap)
};

struct Engine::Sampled {
  struct Failure {
    FinishReason reason = FinishReason::kAbort;
    std::string message;
  };
  ScheduleOutput sched;
  StepOutput step;                          // -1 for entries that were no longer current
  std::map<int64_t, RequestOutput> by_id;   // new tokens (and logprobs) per request
  std::map<int64_t, Failure> failed;        // requests that got no token: ended with an error
};

}  // namespace deepinfer::engine
