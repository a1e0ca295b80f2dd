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
#include "deepinfer/engine/grammar/compiled_grammar.h"
#include "deepinfer/engine/grammar/json_schema_compiler.h"

namespace deepinfer::engine::grammar {

struct GrammarSpec {
  enum Kind { kJsonSchema, kJsonObject /* any JSON */, kRegex, kEbnf } kind = kJsonObject;
  std::string source;
  JsonSchemaOptions opts;
};

using CompileResult = Result<std::shared_ptr<const CompiledGrammar>>;

// Synchronous compile (no cache): the building block the async compiler runs on its workers.
CompileResult compile_grammar(const GrammarSpec& spec, std::shared_ptr<const TokenVocabulary> vocab,
                              const GrammarLimits& limits = {});

class GrammarCompiler {
 public:
  GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, int num_threads = 1,
                  GrammarLimits limits = {}, size_t max_cached = 256);
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // Returns at once; a repeated spec shares the first compile's future.
  std::shared_future<CompileResult> compile_async(const GrammarSpec& spec);
  size_t cache_size() const;

 private:
  void worker();

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

}  // namespace deepinfer::engine::grammar
