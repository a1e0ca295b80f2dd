// Engine-facing entry: compiles a GrammarSpec against one tokenizer vocabulary on worker
// threads, off the serving path, and caches the result by (spec, vocabulary).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/structured/compiled_grammar.h"
#include "deepinfer/structured/json_schema/compiler.h"
#include "deepinfer/structured/structured.h"

namespace deepinfer::structured {

// Synchronous compile (no cache): the building block the async compiler runs on its workers.
// With Precompute::kInBackground the caller must drive CompiledGrammar::precompute_more().
CompileResult compile_grammar(const GrammarSpec& spec, std::shared_ptr<const TokenVocabulary> vocab,
                              const GrammarLimits& limits = {},
                              CompiledGrammar::Precompute mode = CompiledGrammar::Precompute::kBeforeReturn);

class GrammarCompiler {
 public:
  GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, int num_threads = 1,
                  GrammarLimits limits = {}, size_t max_cached = 256);
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // Returns at once; a repeated spec shares the first compile's future. The future is ready
  // once the grammar is built (milliseconds); its contexts are then classified against the
  // vocabulary by the compiler's background thread while requests already decode with it.
  std::shared_future<CompileResult> compile_async(const GrammarSpec& spec);
  size_t cache_size() const;

 private:
  void worker();
  void background();

  // Grammars whose precompute has work left, served round robin in short slices so a new
  // grammar's first contexts are not stuck behind an old grammar's long precompute. Weak:
  // a grammar nobody holds any more is dropped.
  std::deque<std::weak_ptr<const CompiledGrammar>> precompute_queue_;
  std::condition_variable background_cv_;
  std::thread background_thread_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  GrammarLimits limits_;
  size_t max_cached_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::map<std::string, std::shared_future<CompileResult>> cache_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

}  // namespace deepinfer::structured
