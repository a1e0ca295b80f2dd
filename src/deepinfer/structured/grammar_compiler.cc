// Front-end dispatch, worker threads and the compile cache (see grammar_compiler.h).
#include "deepinfer/structured/grammar_compiler.h"

#include "deepinfer/structured/ebnf_parser.h"
#include "deepinfer/structured/automata/regex_compiler.h"

namespace deepinfer::structured {

CompileResult compile_grammar(const GrammarSpec& spec, std::shared_ptr<const TokenVocabulary> vocab,
                              const GrammarLimits& limits, CompiledGrammar::Precompute mode) {
  Result<Grammar> g = Status(StatusCode::kInternal, "unset");
  switch (spec.kind) {
    case GrammarSpec::kJsonSchema: g = compile_json_schema(spec.source, spec.opts, limits); break;
    case GrammarSpec::kJsonObject: g = compile_any_json(spec.opts, limits); break;
    case GrammarSpec::kEbnf: g = compile_ebnf(spec.source, limits); break;
    case GrammarSpec::kRegex: {
      GrammarBuilder b(limits);
      auto e = compile_regex(b, spec.source, {});
      if (!e.is_ok()) return e.status();
      g = b.build(b.rule_with_alts("root", {{*e}}),
                  fmt::format("regex '{}': matches no string (an empty class such as [^\\s\\S], or "
                              "an anchor where no string can meet it such as a^b)",
                              spec.source));
      break;
    }
  }
  if (!g.is_ok()) return g.status();
  return CompiledGrammar::create(std::move(g).value(), std::move(vocab), limits, mode);
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, int num_threads,
                                 GrammarLimits limits, size_t max_cached)
    : vocab_(std::move(vocab)), limits_(limits), max_cached_(max_cached) {
  for (int i = 0; i < std::max(1, num_threads); ++i) threads_.emplace_back([this] { worker(); });
  background_thread_ = std::thread([this] { background(); });
}

GrammarCompiler::~GrammarCompiler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  background_cv_.notify_all();
  for (auto& t : threads_) t.join();
  background_thread_.join();
}

void GrammarCompiler::background() {
  // A slice short enough that the thread notices stop_ and turns to a newer grammar quickly.
  constexpr double kSliceSeconds = 0.002;
  while (true) {
    std::shared_ptr<const CompiledGrammar> g;
    {
      std::unique_lock<std::mutex> lock(mu_);
      background_cv_.wait(lock, [&] { return stop_ || !precompute_queue_.empty(); });
      if (stop_) return;
      g = precompute_queue_.front().lock();
      precompute_queue_.pop_front();
    }
    bool more = false;
    try {
      more = g && g->precompute_more(kSliceSeconds);
    } catch (const std::exception&) {
      more = false;  // out of memory, say: its contexts are then classified on first use
    }
    if (!more) continue;
    std::lock_guard<std::mutex> lock(mu_);
    precompute_queue_.push_back(g);
  }
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
  // The waiters are woken before the background precompute is queued, so they go first.
  auto done = std::make_shared<std::promise<CompileResult>>();
  std::shared_future<CompileResult> fut = done->get_future().share();
  cache_[key] = fut;
  queue_.push_back([this, spec, done] {
    // An exception (out of memory, say) becomes the request's error, not a dead worker.
    CompileResult r = Status(StatusCode::kInternal, "unset");
    try {
      r = compile_grammar(spec, vocab_, limits_, CompiledGrammar::Precompute::kInBackground);
    } catch (const std::exception& e) {
      r = Status(StatusCode::kInternal, fmt::format("grammar: compile failed: {}", e.what()));
    }
    std::shared_ptr<const CompiledGrammar> g = r.is_ok() ? *r : nullptr;
    done->set_value(std::move(r));
    if (g && g->precompute_pending()) {
      std::lock_guard<std::mutex> lock(mu_);
      precompute_queue_.push_front(g);  // newest first: its request is about to start
      background_cv_.notify_one();
    }
  });
  cv_.notify_one();
  return fut;
}

size_t GrammarCompiler::cache_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

}  // namespace deepinfer::structured
