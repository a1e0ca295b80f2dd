// Restore cost and drift. For each prefix length L and prompt: a synthetic prefix P of L tokens
// and a follow-up S (kSuffix tokens):
//   cold     : P alone, prefilled into the prefix cache (its TTFT is a full prefill of P);
//   bounded  : the cache's recent rows dropped (as memory pressure or a store restore leaves
//              it), then P + S with swa_restore "bounded": the hit on P is restored by replaying
//              its last recent_tokens tokens;
//   full     : rows dropped again, P + S with swa_restore "exact": no held rows, so the whole
//              prompt is computed (what exact costs without a checkpoint, and the reference);
//   exact    : P + S + one token once more, "exact", its rows held: the exact restore of a
//              prefix whose window state was kept.
// With --kv-store the restores come from the store after a "restart" (the in-memory prefix
// cache emptied before each run) instead:
//   cold     : P + X (X one block and a token of other tokens): P's blocks reach the store, its
//              checkpoints lie beyond P;
//   bounded  : P + S, "bounded": P's blocks from the store, no checkpoint at their end, so the
//              last recent_tokens tokens are replayed;
//   full     : P + S, "exact": no checkpoint within the hit, so all of it is computed;
//   exact    : P + S again, "exact": its blocks and the checkpoint full left at its prompt's end
//              come from the store (tokens and logprobs must equal full's bitwise);
//   exact ram: P + S once more without emptying the cache: the rows held in memory.
// Drift of bounded against full: greedy agreement over gen_len tokens (prefix of equal tokens
// and share of equal positions) and the KL divergence of the next-token distributions at the
// positions up to the first difference (later ones follow different tokens), over the
// reference's top-20 (the rest of both distributions lumped into one bucket: a lower bound of
// the full KL; the API caps logprobs at 20). The reference's top-1 probability and the mass of
// its top-20 say how peaked the distributions are, so how tight that bound is (random weights
// make them nearly flat unless the head is scaled: scripts/make_v4_mini.py).
// The decoder-side saving (docs/models.md): the trailing layers whose only state is the window
// run over only the last saving_window tokens of a bounded prompt (DeepSeek-V4.1; none for
// DeepSeek-V4). Each prompt P + S is also prefilled from nothing both ways, in one run:
//   saving   : P + S, "bounded", no cached prefix (prefix cache emptied): the tail layers over
//              its last window only;
//   no saving: P + S, "exact", no cached prefix: every layer over every token (the reference).
// Reported: both TTFTs, their ratio, the share of layer-token work the saving keeps, and the
// saving's drift from the full prefill (as bounded's above).
// Each TTFT is also split (`<run>_forward_ms`, `<run>_other_ms`, `<run>_<part>_ms`): the forward
// passes up to the first token, the rest (the store's reads, block loads, scheduling), and the
// model's parts of the forward (attention, compressor_indexer, moe, mhc, head for DeepSeek-V4),
// so a restore's replay is seen apart from its loads.
#include "deepinfer/tools/bench_prefix_restore.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "deepinfer/base/timer.h"
#include "deepinfer/tools/synthetic_prompt.h"

namespace deepinfer::tools {
namespace {

constexpr int kSuffix = 16;
constexpr int kTopLogprobs = 20;
constexpr int kFirstSeq = 200'000;

struct Run {
  double ttft_ms = 0;
  double total_ms = 0;
  // Of ttft_ms: the engine's forward passes (the replayed and new tokens' compute) and, where
  // the model reports them, its parts (attention, compressor_indexer, moe, mhc, head). The rest
  // of the TTFT is waiting for the store's reads, loading blocks and scheduling.
  double forward_ms = 0;
  std::map<std::string, double> part_ms;
  int cached_tokens = 0;
  int replayed_tokens = 0;
  std::vector<int32_t> tokens;
  std::vector<engine::LogprobEntry> logprobs;
  std::string error;
};

Run run_one(engine::Engine& e, const std::vector<int32_t>& prompt, int max_tokens,
            engine::SwaRestore swa) {
  engine::GenerationRequest r;
  r.prompt_ids = prompt;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  r.sampling.logprobs = kTopLogprobs;
  r.swa_restore = swa;
  Run out;
  const double forward0 = e.stats().forward_seconds;
  std::map<std::string, double> parts0;
  for (const auto& [name, seconds] : e.forward_part_seconds()) parts0[name] = seconds;
  const double t0 = now_seconds();
  auto id = e.add_request(r);
  if (!id.is_ok()) {
    out.error = id.status().message();
    return out;
  }
  while (e.has_unfinished())
    for (const engine::RequestOutput& o : e.step()) {
      if (out.tokens.empty() && !o.new_token_ids.empty()) {
        out.ttft_ms = (now_seconds() - t0) * 1e3;
        out.forward_ms = (e.stats().forward_seconds - forward0) * 1e3;
        for (const auto& [name, seconds] : e.forward_part_seconds())
          out.part_ms[name] = (seconds - parts0[name]) * 1e3;
      }
      out.tokens.insert(out.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      out.logprobs.insert(out.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
      if (o.finished) {
        out.cached_tokens = o.cached_tokens;
        out.replayed_tokens = o.replayed_tokens;
        if (!o.error.empty()) out.error = o.error;
      }
    }
  out.total_ms = (now_seconds() - t0) * 1e3;
  return out;
}

// KL(ref || got) over ref's top tokens plus one bucket for the rest of each distribution.
double top_kl(const engine::LogprobEntry& ref, const engine::LogprobEntry& got) {
  std::map<int32_t, double> q;
  for (const auto& [t, lp] : got.top) q[t] = std::exp(double(lp));
  const double q_floor = got.top.empty() ? 0 : std::exp(double(got.top.back().second));
  double kl = 0, p_top = 0, q_top = 0;
  for (const auto& [t, lp] : ref.top) {
    const double p = std::exp(double(lp));
    const auto it = q.find(t);
    const double qt = it != q.end() ? it->second : q_floor;  // below got's top-k: at most its last
    p_top += p;
    q_top += qt;
    if (p > 0) kl += p * std::log(p / std::max(qt, 1e-30));
  }
  const double p_rest = std::max(0.0, 1 - p_top), q_rest = std::max(1e-30, 1 - q_top);
  if (p_rest > 0) kl += p_rest * std::log(p_rest / q_rest);
  return std::max(0.0, kl);
}

struct Drift {
  size_t equal_prefix = 0;
  double agreement = 0;  // share of equal positions
  double kl_sum = 0;
  double kl_max = 0;
  int kl_positions = 0;
  bool same_first = false;
  double top1_sum = 0;      // the reference's largest probability at the KL positions
  double top_mass_sum = 0;  // the probability its top-20 hold there
};

Drift drift(const Run& full, const Run& bounded) {
  Drift d;
  const size_t n = std::min(bounded.tokens.size(), full.tokens.size());
  while (d.equal_prefix < n && bounded.tokens[d.equal_prefix] == full.tokens[d.equal_prefix])
    ++d.equal_prefix;
  int equal = 0;
  for (size_t i = 0; i < n; ++i) equal += bounded.tokens[i] == full.tokens[i] ? 1 : 0;
  const size_t kl_positions = std::min(d.equal_prefix + 1, full.logprobs.size());
  for (size_t i = 0; i < kl_positions && i < bounded.logprobs.size(); ++i) {
    const double kl = top_kl(full.logprobs[i], bounded.logprobs[i]);
    d.kl_sum += kl;
    d.kl_max = std::max(d.kl_max, kl);
    const auto& ref = full.logprobs[i].top;
    if (!ref.empty()) d.top1_sum += std::exp(double(ref[0].second));
    for (const auto& [t, lp] : ref) d.top_mass_sum += std::exp(double(lp));
  }
  d.kl_positions = static_cast<int>(kl_positions);
  d.agreement = full.tokens.empty() ? 0 : double(equal) / double(full.tokens.size());
  d.same_first = n > 0 && bounded.tokens[0] == full.tokens[0];
  return d;
}

// Where a run's TTFT went: "<name>_forward_ms" (the forward passes up to the first token),
// "<name>_other_ms" (the rest: the store's reads, block loads, scheduling) and the model's parts.
void add_breakdown(nlohmann::json& j, const std::string& name, const Run& r, double n = 1) {
  j[name + "_forward_ms"] = r.forward_ms / n;
  j[name + "_other_ms"] = (r.ttft_ms - r.forward_ms) / n;
  for (const auto& [part, ms] : r.part_ms)
    if (part != "total") j[name + "_" + part + "_ms"] = ms / n;
}

// Sums runs' timings (for the per-length means).
void accumulate(Run& sum, const Run& r) {
  sum.ttft_ms += r.ttft_ms;
  sum.forward_ms += r.forward_ms;
  for (const auto& [part, ms] : r.part_ms) sum.part_ms[part] += ms;
}

bool bitwise_equal(const Run& a, const Run& b) {
  if (a.tokens != b.tokens || a.logprobs.size() != b.logprobs.size()) return false;
  for (size_t i = 0; i < a.logprobs.size(); ++i)
    if (a.logprobs[i].logprob != b.logprobs[i].logprob || a.logprobs[i].top != b.logprobs[i].top)
      return false;
  return true;
}

// Trailing layers whose only state is the window (docs/models.md, decoder-side saving).
int window_only_tail(const model::KvCacheSpec& spec) {
  int tail = 0;
  for (int l = spec.num_layers - 1; l >= 0; --l) {
    bool only_window = true;
    for (const model::StateKind& k : spec.state_kinds)
      if (k.layer == l && k.name != "window_kv") only_window = false;
    if (!only_window) break;
    ++tail;
  }
  return tail;
}

}  // namespace

int run_prefix_restore_bench(const PrefixRestoreBenchOptions& opts) {
  if (opts.prompt_lens.empty())
    return report_error(invalid_argument("bench --mode prefix-restore: no --prompt-lens"));
  EngineFlags ef = opts.engine;
  ef.enable_prefix_caching = true;
  auto loaded = load_model_for_cli(ef.model);
  if (!loaded.is_ok()) return report_error(loaded.status());
  if (!loaded->model->kv_cache_spec().has_recent())
    return report_error(unsupported(
        "bench --mode prefix-restore: {} has no sliding-window state to restore (DeepSeek-V4 "
        "models only)",
        ef.model));
  const model::KvCacheSpec spec = loaded->model->kv_cache_spec();  // before the engine takes it
  auto eng = make_engine(*loaded, ef);
  if (!eng.is_ok()) return report_error(eng.status());
  engine::Engine& e = **eng;
  const int32_t vocab = static_cast<int32_t>(e.model_config().vocab_size);
  const bool with_store = !ef.kv_store.empty();
  const int tail_layers = spec.saving_window > 0 ? window_only_tail(spec) : 0;
  Drift all;       // over every prompt of every length
  Drift all_base;  // --context-baseline; equal_prefix counts equal first tokens
  int all_prompts = 0, all_same_first = 0;
  for (int len : opts.prompt_lens) {
    // Layer-token work the decoder-side saving keeps for a prefill of this prompt: the tail
    // layers over at most saving_window tokens, the others over all of them.
    const double tokens = len + kSuffix;
    const double work_ratio =
        (double(spec.num_layers - tail_layers) * tokens +
         double(tail_layers) * std::min(tokens, double(spec.saving_window))) /
        (double(spec.num_layers) * tokens);
    bool exact_all_bitwise = true;
    double agree_sum = 0, kl_sum = 0, kl_max = 0, bounded_ms = 0, full_ms = 0, exact_ms = 0;
    int kl_n = 0, same_first = 0;
    double saving_ms = 0, no_saving_ms = 0, saving_agree_sum = 0, saving_kl_sum = 0;
    int saving_kl_n = 0, saving_same_first = 0;
    Run bounded_sum, full_sum, exact_sum;  // timings only
    for (int rep = 0; rep < opts.repeat; ++rep) {
      const int seq = kFirstSeq + len * 100 + rep;
      std::vector<int32_t> prefix = synthetic_prompt(len, seq, vocab);
      std::vector<int32_t> prompt = prefix;
      const auto suffix = synthetic_prompt(kSuffix, seq + 50'000, vocab);
      prompt.insert(prompt.end(), suffix.begin(), suffix.end());
      Run cold, bounded, full, exact, exact_ram;
      if (with_store) {
        std::vector<int32_t> seeded = prefix;
        const auto other = synthetic_prompt(e.kv_block_size() + 1, seq + 70'000, vocab);
        seeded.insert(seeded.end(), other.begin(), other.end());
        e.reset_prefix_cache();
        cold = run_one(e, seeded, 1, engine::SwaRestore::kExact);
        e.reset_prefix_cache();
        bounded = run_one(e, prompt, opts.gen_len, engine::SwaRestore::kBounded);
        e.reset_prefix_cache();
        full = run_one(e, prompt, opts.gen_len, engine::SwaRestore::kExact);
        e.reset_prefix_cache();
        exact = run_one(e, prompt, opts.gen_len, engine::SwaRestore::kExact);
        exact_ram = run_one(e, prompt, opts.gen_len, engine::SwaRestore::kExact);
      } else {
        cold = run_one(e, prefix, 1, engine::SwaRestore::kExact);
        e.drop_cached_recent_rows();
        bounded = run_one(e, prompt, opts.gen_len, engine::SwaRestore::kBounded);
        e.drop_cached_recent_rows();
        full = run_one(e, prompt, opts.gen_len, engine::SwaRestore::kExact);
        std::vector<int32_t> again = prompt;
        again.push_back(full.tokens.empty() ? 100 : full.tokens[0]);
        exact = run_one(e, again, 1, engine::SwaRestore::kExact);
      }
      // The decoder-side saving against the full prefill of the same prompt, both from nothing.
      // Measured in the order no-saving, saving, so neither gets a warmer cache of weights.
      e.reset_prefix_cache();
      Run no_saving = run_one(e, prompt, opts.gen_len, engine::SwaRestore::kExact);
      e.reset_prefix_cache();
      Run saving = run_one(e, prompt, opts.gen_len, engine::SwaRestore::kBounded);
      e.reset_prefix_cache();
      for (const Run* r : {&cold, &bounded, &full, &exact, &exact_ram, &no_saving, &saving})
        if (!r->error.empty()) return report_error(Status(StatusCode::kInternal, r->error));
      const Drift d = drift(full, bounded);
      const Drift ds = drift(no_saving, saving);
      saving_ms += saving.ttft_ms;
      no_saving_ms += no_saving.ttft_ms;
      saving_agree_sum += ds.agreement;
      saving_kl_sum += ds.kl_sum;
      saving_kl_n += ds.kl_positions;
      saving_same_first += ds.same_first ? 1 : 0;
      Drift base;
      if (opts.context_baseline) {
        // The token just before the replayed span of the hit, changed; exact.
        std::vector<int32_t> changed = prompt;
        const int hit = bounded.cached_tokens - bounded.replayed_tokens - 1;
        if (hit >= 0) changed[size_t(hit)] = changed[size_t(hit)] == 100 ? 101 : 100;
        if (!with_store) e.drop_cached_recent_rows();
        const Run other = run_one(e, changed, opts.gen_len, engine::SwaRestore::kExact);
        if (!other.error.empty()) return report_error(Status(StatusCode::kInternal, other.error));
        base = drift(full, other);
        all_base.agreement += base.agreement;
        all_base.kl_sum += base.kl_sum;
        all_base.kl_positions += base.kl_positions;
        all_base.equal_prefix += base.same_first ? 1 : 0;
      }
      const size_t equal_prefix = d.equal_prefix;
      const double agree = d.agreement;
      const double kl = d.kl_sum;
      const size_t kl_positions = size_t(d.kl_positions);
      agree_sum += agree;
      kl_sum += kl;
      kl_max = std::max(kl_max, d.kl_max);
      kl_n += d.kl_positions;
      all.agreement += agree;
      all.kl_sum += kl;
      all.kl_max = std::max(all.kl_max, d.kl_max);
      all.kl_positions += d.kl_positions;
      all.top1_sum += d.top1_sum;
      all.top_mass_sum += d.top_mass_sum;
      all.equal_prefix += d.equal_prefix;
      ++all_prompts;
      all_same_first += d.same_first ? 1 : 0;
      same_first += d.same_first ? 1 : 0;
      bounded_ms += bounded.ttft_ms;
      full_ms += full.ttft_ms;
      accumulate(bounded_sum, bounded);
      accumulate(full_sum, full);
      accumulate(exact_sum, exact);
      exact_ms += exact.ttft_ms;
      nlohmann::json j = {{"mode", "prefix-restore"}, {"prefix_tokens", len},
                          {"prompt_tokens", prompt.size()}, {"repeat", rep},
                          {"cold_prefix_ttft_ms", cold.ttft_ms},
                          {"bounded_ttft_ms", bounded.ttft_ms},
                          {"bounded_cached_tokens", bounded.cached_tokens},
                          {"bounded_replayed_tokens", bounded.replayed_tokens},
                          {"full_ttft_ms", full.ttft_ms}, {"full_cached_tokens", full.cached_tokens},
                          {"exact_restore_ttft_ms", exact.ttft_ms},
                          {"exact_cached_tokens", exact.cached_tokens},
                          {"greedy_equal_prefix", equal_prefix}, {"greedy_agreement", agree},
                          {"mean_top20_kl", kl_positions ? kl / double(kl_positions) : 0.0},
                          {"max_top20_kl", d.kl_max}, {"kl_positions", kl_positions},
                          {"ref_top1_prob", kl_positions ? d.top1_sum / double(kl_positions) : 0.0},
                          {"ref_top20_mass",
                           kl_positions ? d.top_mass_sum / double(kl_positions) : 0.0},
                          {"gen_tokens", opts.gen_len}, {"threads", e.num_threads()},
                          {"from_kv_store", with_store},
                          {"saving_prefill_ttft_ms", saving.ttft_ms},
                          {"no_saving_prefill_ttft_ms", no_saving.ttft_ms},
                          {"saving_greedy_agreement", ds.agreement},
                          {"saving_mean_top20_kl",
                           ds.kl_positions ? ds.kl_sum / double(ds.kl_positions) : 0.0}};
      add_breakdown(j, "bounded", bounded);
      add_breakdown(j, "full", full);
      add_breakdown(j, "exact_restore", exact);
      if (opts.context_baseline) {
        j["context_changed_agreement"] = base.agreement;
        j["context_changed_mean_top20_kl"] =
            base.kl_positions ? base.kl_sum / base.kl_positions : 0.0;
      }
      if (with_store) {
        j["exact_from_store_bitwise_equal_to_full"] = bitwise_equal(full, exact);
        j["exact_ram_ttft_ms"] = exact_ram.ttft_ms;
        exact_all_bitwise = exact_all_bitwise && bitwise_equal(full, exact);
      }
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    }
    const double n = opts.repeat;
    nlohmann::json s = {{"mode", "prefix-restore"}, {"summary", true}, {"prefix_tokens", len},
                        {"prompts", opts.repeat}, {"bounded_ttft_ms", bounded_ms / n},
                        {"full_ttft_ms", full_ms / n}, {"exact_restore_ttft_ms", exact_ms / n},
                        {"bounded_over_full", full_ms > 0 ? bounded_ms / full_ms : 0.0},
                        {"first_token_agreement", same_first / n},
                        {"greedy_agreement", agree_sum / n},
                        {"mean_top20_kl", kl_n ? kl_sum / kl_n : 0.0}, {"max_top20_kl", kl_max},
                        {"from_kv_store", with_store},
                        {"decoder_side_skippable_layers", tail_layers},
                        {"decoder_side_prefill_work_ratio", work_ratio},
                        {"saving_prefill_ttft_ms", saving_ms / n},
                        {"no_saving_prefill_ttft_ms", no_saving_ms / n},
                        {"saving_speedup", saving_ms > 0 ? no_saving_ms / saving_ms : 0.0},
                        {"saving_first_token_agreement", saving_same_first / n},
                        {"saving_greedy_agreement", saving_agree_sum / n},
                        {"saving_mean_top20_kl", saving_kl_n ? saving_kl_sum / saving_kl_n : 0.0}};
    add_breakdown(s, "bounded", bounded_sum, n);
    add_breakdown(s, "full", full_sum, n);
    add_breakdown(s, "exact_restore", exact_sum, n);
    if (with_store) s["exact_from_store_bitwise_equal_to_full"] = exact_all_bitwise;
    std::printf("%s\n", s.dump().c_str());
    std::fflush(stdout);
  }
  // Over every prompt: the drift figures the docs quote.
  const double n = all_prompts, pos = all.kl_positions;
  nlohmann::json s = {{"mode", "prefix-restore"}, {"summary", "all"}, {"prompts", all_prompts},
                      {"gen_tokens", opts.gen_len}, {"first_token_agreement", all_same_first / n},
                      {"greedy_agreement", all.agreement / n},
                      {"greedy_equal_prefix", double(all.equal_prefix) / n},
                      {"mean_top20_kl", pos ? all.kl_sum / pos : 0.0},
                      {"max_top20_kl", all.kl_max}, {"kl_positions", all.kl_positions},
                      {"ref_top1_prob", pos ? all.top1_sum / pos : 0.0},
                      {"ref_top20_mass", pos ? all.top_mass_sum / pos : 0.0},
                      {"from_kv_store", with_store}};
  if (opts.context_baseline) {
    s["context_changed_first_token_agreement"] = double(all_base.equal_prefix) / n;
    s["context_changed_agreement"] = all_base.agreement / n;
    s["context_changed_mean_top20_kl"] =
        all_base.kl_positions ? all_base.kl_sum / all_base.kl_positions : 0.0;
  }
  std::printf("%s\n", s.dump().c_str());
  return kExitOk;
}

}  // namespace deepinfer::tools
