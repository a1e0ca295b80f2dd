// See bench_mask.h.
#include "deepinfer/tools/bench_mask.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/grammar_matcher.h"
#include "deepinfer/structured/json_schema/instance_text.h"
#include "deepinfer/structured/masks/vocab_trie.h"

namespace deepinfer::tools {
using structured::CompiledGrammar;
using structured::CompileResult;
using structured::ContextStats;
using structured::GrammarCompiler;
using structured::GrammarLimits;
using structured::GrammarMatcher;
using structured::GrammarSpec;
using structured::GreedyTokenizer;
using structured::instance_text;
using structured::shared_vocab_trie;
using structured::TokenVocabulary;

namespace {
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::string subset_of(const std::string& file) {
  size_t p = file.find("---");
  if (p != std::string::npos) return file.substr(0, p);
  std::string s = file.substr(0, file.rfind('.'));
  size_t u = s.rfind('_');
  return u == std::string::npos ? s : s.substr(0, u);
}
// The refusal message with quoted JSON pointers ('/...' or '') replaced by <ptr>, so equal
// causes at different places count together.
std::string refusal_reason(const std::string& msg) {
  std::string out;
  for (size_t i = 0; i < msg.size(); ++i) {
    if (msg[i] == '\'' && i + 1 < msg.size() && (msg[i + 1] == '/' || msg[i + 1] == '\'')) {
      size_t close = msg.find('\'', i + 1);
      if (close != std::string::npos) {
        out += "<ptr>";
        i = close;
        continue;
      }
    }
    out += msg[i];
  }
  return out.substr(0, 120);
}
}  // namespace

void MaskBenchCounts::add(const MaskBenchCounts& o) {
  schemas += o.schemas;
  compiled += o.compiled;
  refused += o.refused;
  valid_tests += o.valid_tests;
  invalid_tests += o.invalid_tests;
  wrongly_rejected += o.wrongly_rejected;
  wrongly_accepted += o.wrongly_accepted;
  mask_mismatches += o.mask_mismatches;
  ill_formed_tests += o.ill_formed_tests;
}

std::vector<IllFormedText> ill_formed_variants(const std::string& text) {
  // Byte offsets just inside the opening quote of the first key and of the first string value.
  std::optional<size_t> key, value;
  for (size_t i = 0; i < text.size() && !(key && value); ++i) {
    if (text[i] != '"') continue;
    const size_t open = i;
    for (++i; i < text.size() && text[i] != '"'; ++i)
      if (text[i] == '\\') ++i;
    size_t j = i + 1;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\n' || text[j] == '\t' || text[j] == '\r')) ++j;
    std::optional<size_t>& slot = j < text.size() && text[j] == ':' ? key : value;
    if (!slot) slot = open + 1;
  }
  static const std::pair<const char*, const char*> kBad[] = {
      {"\xff", "ff"}, {"\xc0\xaf", "overlong c0 af"}, {"\xed\xa0\x80", "surrogate ed a0 80"},
      {"\xe2\x82", "truncated e2 82"}};
  std::vector<IllFormedText> out;
  for (const auto& [where, at] : {std::pair<const char*, std::optional<size_t>>{"key", key}, {"value", value}}) {
    if (!at) continue;
    for (const auto& [bytes, name] : kBad)
      out.push_back({text.substr(0, *at) + bytes + text.substr(*at), fmt::format("{} bytes {}", where, name)});
  }
  return out;
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  p.p50 = v[v.size() / 2];
  p.p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)];
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / v.size();
  return p;
}

// Longer than our ~120-line limit on purpose: one schema's compile, precompute thread, timed
// walks and tallies share the timers and result vectors, and keeping the measured path in
// one loop body shows exactly what is inside each timed region.
Result<MaskBenchResult> run_mask_benchmark(std::shared_ptr<const TokenVocabulary> vocab,
                                           const MaskBenchOptions& opts) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(opts.dir, ec))
    if (e.is_regular_file()) files.push_back(e.path().filename().string());
  if (ec) return io_error("mask bench: cannot list '{}': {}", opts.dir, ec.message());
  if (files.empty()) return not_found("mask bench: no schema files in '{}'", opts.dir);
  std::sort(files.begin(), files.end());
  GreedyTokenizer greedy(*vocab);
  shared_vocab_trie(vocab);  // once per tokenizer, like the peers' tokenizer setup: not timed
  auto encode = opts.encode ? opts.encode : [&](const std::string& t) { return greedy.encode(t); };

  MaskBenchResult res;
  res.precompute = opts.precompute;
  std::vector<double> compile_ms, mask_us, precompute_ms, lazy_us;
  std::vector<uint32_t> mask(vocab->mask_words());
  int taken = 0;
  for (size_t fi = 0; fi < files.size(); fi += std::max(1, opts.stride)) {
    if (opts.limit > 0 && taken >= opts.limit) break;
    ++taken;
    const std::string& name = files[fi];
    MaskBenchCounts c;
    c.schemas = 1;
    Json doc;
    {
      std::ifstream in(opts.dir + "/" + name);
      std::stringstream ss;
      ss << in.rdbuf();
      try {
        doc = Json::parse(ss.str());
      } catch (const std::exception& e) {
        return corrupt("mask bench: '{}' is not valid JSON: {}", name, e.what());
      }
    }
    const Json& schema = doc["schema"];
    GrammarSpec spec{GrammarSpec::kJsonSchema, schema.dump(), opts.schema_opts};
    GrammarLimits limits = opts.limits;
    if (opts.compile_only) limits.precompute_seconds = 0;  // a tally, not a timing
    // Compiled in this thread, as the peers are (so the time is the work, not a thread
    // handoff); in background mode a second thread then precomputes as GrammarCompiler's
    // background thread does, while the instances are walked.
    const auto mode = opts.precompute == MaskBenchPrecompute::kFirst
                          ? CompiledGrammar::Precompute::kBeforeReturn
                      : opts.precompute == MaskBenchPrecompute::kNone
                          ? CompiledGrammar::Precompute::kOnFirstUse
                          : CompiledGrammar::Precompute::kInBackground;
    auto t0 = Clock::now();
    CompileResult compiled = compile_grammar(spec, vocab, limits, mode);
    compile_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    std::thread background;
    if (compiled.is_ok() && (*compiled)->precompute_pending() &&
        opts.precompute == MaskBenchPrecompute::kBackground)
      background = std::thread([g = *compiled] {
        while (g->precompute_more(0.002)) {
        }
      });
    if (compiled.is_ok() && opts.prefill_ms > 0)  // the prompt's forward pass, once
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opts.prefill_ms));
    if (!compiled.is_ok()) {
      c.refused = 1;
      // Two subsets have no test instances; their refusals are listed apart.
      std::string sub = subset_of(name);
      bool no_tests = sub == "Handwritten" || sub == "Synthesized";
      const std::string reason = (no_tests ? "[no tests] " : "") + refusal_reason(compiled.status().message());
      if (res.refusal_reasons[reason]++ == 0) res.refusal_examples[reason] = name;
    } else if (opts.compile_only) {
      c.compiled = 1;
    } else {
      c.compiled = 1;
      GrammarMatcher m(*compiled);
      // Walks `ids` + EOS, a mask before every token (timed for valid instances); whether all
      // were accepted and the grammar then ended.
      auto walk = [&](std::vector<int32_t> ids, bool timed) {
        ids.push_back(vocab->eos_ids.at(0));
        m.reset();
        bool ok = true;
        for (int32_t id : ids) {
          // A decode step's forward pass between masks (background precompute runs meanwhile).
          if (opts.step_ms > 0 && timed)
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opts.step_ms));
          const ContextStats before = (*compiled)->context_stats();
          auto m0 = Clock::now();
          m.fill_next_token_bitmask(mask.data());
          const double us = std::chrono::duration<double, std::micro>(Clock::now() - m0).count();
          if (timed) {
            mask_us.push_back(us);
            const ContextStats after = (*compiled)->context_stats();
            if (after.lazy != before.lazy || after.direct_masks != before.direct_masks)
              lazy_us.push_back(us);
          }
          bool allowed = (mask[id >> 5] >> (id & 31)) & 1;
          ok = m.accept_token(id);
          if (ok != allowed) c.mask_mismatches++;
          if (!ok) break;
        }
        return ok && m.is_terminated();
      };
      const Json& tests = doc["tests"];
      for (size_t ti = 0; ti < tests.size(); ++ti) {
        bool valid = tests[ti].value("valid", false);
        if (!valid && !opts.walk_invalid) continue;
        (valid ? c.valid_tests : c.invalid_tests)++;
        const std::string text = instance_text(schema, tests[ti]["data"]);
        const bool ok = walk(encode(text), valid);
        if (valid && !ok) c.wrongly_rejected++;
        if (!valid && ok) {
          c.wrongly_accepted++;
          res.wrongly_accepted.push_back(fmt::format("{}#{}", name, ti));
        }
        if (!valid || !opts.walk_ill_formed) continue;
        // The same text with bytes that are not UTF-8 in its first key and its first string
        // value: never JSON, so each must be rejected (keys are checked as values are).
        for (const IllFormedText& bad : ill_formed_variants(text)) {
          std::vector<int32_t> ids = encode(bad.text);
          if (ids.empty()) continue;
          c.ill_formed_tests++;
          if (walk(std::move(ids), false)) {
            c.wrongly_accepted++;
            res.wrongly_accepted.push_back(fmt::format("{}#{} {}", name, ti, bad.what));
          }
        }
      }
    }
    if (background.joinable()) background.join();  // the precompute ends within its budget
    if (c.compiled && !opts.compile_only) {
      ContextStats st = (*compiled)->context_stats();
      res.contexts_precomputed += st.precomputed;
      res.contexts_lazy += st.lazy;
      res.trie_nodes_visited += st.nodes_visited;
      res.precompute_incomplete += !st.complete;
      precompute_ms.push_back(st.precompute_ms);
      res.slowest_precompute.emplace_back(st.precompute_ms, name);
      std::sort(res.slowest_precompute.rbegin(), res.slowest_precompute.rend());
      if (res.slowest_precompute.size() > 5) res.slowest_precompute.pop_back();
    }
    res.subsets[subset_of(name)].add(c);
    res.total.add(c);
  }
  res.compile_ms = percentiles(std::move(compile_ms));
  res.mask_us = percentiles(std::move(mask_us));
  res.precompute_ms = percentiles(std::move(precompute_ms));
  res.lazy_mask_us = percentiles(std::move(lazy_us));
  return res;
}

std::string MaskBenchResult::report() const {
  std::string out =
      fmt::format("{:<28} {:>7} {:>8} {:>7} {:>6} {:>7} {:>7} {:>9} {:>9} {:>6}\n", "subset", "schemas",
                  "compiled", "refused", "valid", "invalid", "non-utf", "wrong-rej", "wrong-acc", "mask!");
  auto row = [&](const std::string& n, const MaskBenchCounts& c) {
    out += fmt::format("{:<28} {:>7} {:>8} {:>7} {:>6} {:>7} {:>7} {:>9} {:>9} {:>6}\n", n.substr(0, 28),
                       c.schemas, c.compiled, c.refused, c.valid_tests, c.invalid_tests,
                       c.ill_formed_tests, c.wrongly_rejected, c.wrongly_accepted, c.mask_mismatches);
  };
  for (const auto& [n, c] : subsets) row(n, c);
  row("TOTAL", total);
  out += fmt::format("compile ms: p50 {:.2f} p99 {:.2f} mean {:.2f} (n={})\n", compile_ms.p50,
                     compile_ms.p99, compile_ms.mean, compile_ms.n);
  out += fmt::format("mask us/token: p50 {:.1f} p99 {:.1f} mean {:.1f} (n={})\n", mask_us.p50,
                     mask_us.p99, mask_us.mean, mask_us.n);
  out += fmt::format(
      "  of which ran ahead of the precompute (a scan for the key set, or a context classified): "
      "p50 {:.1f} p99 {:.1f} "
      "mean {:.1f} (n={})\n",
      lazy_mask_us.p50, lazy_mask_us.p99, lazy_mask_us.mean, lazy_mask_us.n);
  const bool none = precompute == MaskBenchPrecompute::kNone;
  if (none) {
    out += fmt::format(
        "no precompute: {} contexts, each classified by the first mask that needs it\n",
        contexts_lazy);
  } else {
    out += fmt::format("precompute ms per grammar: p50 {:.2f} p99 {:.2f} mean {:.2f}\n",
                       precompute_ms.p50, precompute_ms.p99, precompute_ms.mean);
    out += fmt::format("contexts: {} precomputed, {} lazy; {} grammars hit the precompute budget\n",
                       contexts_precomputed, contexts_lazy, precompute_incomplete);
  }
  const size_t contexts = contexts_precomputed + contexts_lazy;
  out += fmt::format(
      "vocabulary-trie nodes visited per context: {:.0f} (the scan's work; {} in all)\n",
      contexts ? static_cast<double>(trie_nodes_visited) / contexts : 0.0, trie_nodes_visited);
  for (const auto& [ms, file] : slowest_precompute)
    if (!none) out += fmt::format("slowest precompute: {:.1f} ms {}\n", ms, file);
  for (const auto& [reason, n] : refusal_reasons)
    out += fmt::format("refused {}x (e.g. {}): {}\n", n, refusal_examples.at(reason), reason);
  for (const auto& w : wrongly_accepted) out += "WRONGLY ACCEPTED: " + w + "\n";
  return out;
}

}  // namespace deepinfer::tools
