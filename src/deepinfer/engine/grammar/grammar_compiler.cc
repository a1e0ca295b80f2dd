// Front-end dispatch, worker threads and the compile cache (see grammar_compiler.h).
#include "deepinfer/engine/grammar/grammar_compiler.h"

#include "deepinfer/engine/grammar/ebnf_parser.h"
#include "deepinfer/engine/grammar/regex_compiler.h"

namespace deepinfer::engine::grammar {

CompileResult compile_grammar(const GrammarSpec& spec, std::shared_ptr<const TokenVocabulary> vocab,
                              const GrammarLimits& limits) {
  Result<Grammar> g = Status(StatusCode::kInternal, "unset");
  switch (spec.kind) {
    case GrammarSpec::kJsonSchema: g = compile_json_schema(spec.source, spec.opts, limits); break;
    case GrammarSpec::kJsonObject: g = compile_any_json(spec.opts, limits); break;
    case GrammarSpec::kEbnf: g = compile_ebnf(spec.source, limits); break;
    case GrammarSpec::kRegex: {
      GrammarBuilder b(limits);
      auto e = compile_regex(b, spec.source, {});
      if (!e.is_ok()) return e.status();
      g = b.build(b.rule_with_alts("root", {{*e}}));
      break;
    }
  }
  if (!g.is_ok()) return g.status();
  return CompiledGrammar::create(std::move(g).value(), std::move(vocab), limits);
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, int num_threads,
                                 GrammarLimits limits, size_t max_cached)
    : vocab_(std::move(vocab)), limits_(limits), max_cached_(max_cached) {
  for (int i = 0; i < std::max(1, num_threads); ++i) threads_.emplace_back([this] { worker(); });
}

GrammarCompiler::~GrammarCompiler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void GrammarCompiler::worker() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

std::shared_future<CompileResult> GrammarCompiler::compile_async(const GrammarSpec& spec) {
  // The vocabulary is fixed per compiler, so the spec alone keys the cache.
  std::string key = fmt::format("{}|{}{}{}{}|{}", static_cast<int>(spec.kind), spec.opts.any_whitespace,
                                spec.opts.strict_properties, spec.opts.enforce_formats,
                                spec.opts.any_order_keys, spec.source);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  if (cache_.size() >= max_cached_) {
    // Drop finished entries; running ones stay so their waiters share them.
    for (auto c = cache_.begin(); c != cache_.end();)
      c = c->second.wait_for(std::chrono::seconds(0)) == std::future_status::ready ? cache_.erase(c) : std::next(c);
  }
  auto task = std::make_shared<std::packaged_task<CompileResult()>>(
      [spec, vocab = vocab_, limits = limits_] { return compile_grammar(spec, vocab, limits); });
  std::shared_future<CompileResult> fut = task->get_future().share();
  cache_[key] = fut;
  queue_.push_back([task] { (*task)(); });
  cv_.notify_one();
  return fut;
}

size_t GrammarCompiler::cache_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

}  // namespace deepinfer::engine::grammar
