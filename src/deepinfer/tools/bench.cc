// `deepinfer bench`: throughput measurements, one JSON object per measurement on stdout.
//   --mode prefill: B prompts of --prompt-len tokens, one output token each.
//   --mode decode:  B sequences generating --gen-len tokens each after --prompt-len tokens;
//                   decode speed is measured once every sequence has its first token.
//   Both sweep every --batch for every --prompt-len (comma lists); --plot draws one curve
//   per prompt length.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "deepinfer/base/timer.h"
#include "deepinfer/tools/bench_mask.h"
#include "deepinfer/engine/grammar_vocabulary.h"
#include "deepinfer/model/format/gguf.h"
#include "deepinfer/model/model_path.h"
#include "deepinfer/tools/bench_kvstore.h"
#include "deepinfer/tools/bench_prefix_restore.h"
#include "deepinfer/tools/bench_kvstore_io.h"
#include "deepinfer/tools/bench_kv_transfer.h"
#include "deepinfer/tools/bench_attention.h"
#include "deepinfer/tools/bench_matmul.h"
#include "deepinfer/tools/bench_plot.h"
#include "deepinfer/tools/bench_schema_compile.h"
#include "deepinfer/tools/bench_serve.h"
#include "deepinfer/tools/bench_spec.h"
#include "deepinfer/tools/bench_vision.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/membw.h"
#include "deepinfer/tools/subcommands.h"
#include "deepinfer/tools/synthetic_prompt.h"

namespace deepinfer::tools {
namespace {

struct BenchFlags {
  EngineFlags engine;
  std::string mode = "decode";
  std::string batches;  // empty = the mode's default (1; matmul: 1,256)
  std::vector<std::string> matmul_shapes;
  size_t block_kib = 1024;
  std::string prompt_len = "512";  // comma list (prefill, decode); serve takes one
  int gen_len = 128;
  int repeat = 1;
  std::string plot;
  std::vector<std::string> plot_with;  // JSON-lines files whose rows --plot draws too
  std::string spec_tasks;  // spec: comma-separated tasks; empty = all
  std::string spec_configs;   // spec: comma-separated off, fixed, dspark; empty = all three
  std::string spec_trace;     // spec: prefix of per-measurement verification traces
  std::string disaggregated;  // --mode serve: "P,D" prefill and decode engines to measure too
  std::string data = "../shared/data/jsonschemabench";
  int limit = 0;
  int stride = 1;
  std::string grammar_precompute = "background";
  std::string json_mode = "both";  // mask: whitespace | compact | both
  double step_ms = 0;
  double prefill_ms = 0;
  std::string prompt_lens = "2000,8000";
  bool context_baseline = false;  // prefix-restore: also the drift of a one-token context change
  int megabytes = 1;
  std::string transfer_bytes = "4194304";  // kv-transfer: message sizes, comma list
  int transfer_messages = 0;               // kv-transfer: per size, 0 = about 256 MiB worth
  std::string image;                       // vision: the image file
};

// Structured outputs: compile time and per-token mask time over JSONSchemaBench.
int run_mask_bench(const BenchFlags& f) {
  auto resolved = model::resolve_model(f.engine.model);
  if (!resolved.is_ok()) return report_error(resolved.status());
  if (resolved->kind != model::ResolvedModel::Kind::kGguf)
    return report_error(unsupported("bench --mode mask: only GGUF models for now"));
  auto gguf = format::GgufFile::open(resolved->path);
  if (!gguf.is_ok()) return report_error(gguf.status());
  auto tok = recipe::Tokenizer::from_gguf(**gguf);
  if (!tok.is_ok()) return report_error(tok.status());
  auto vocab = std::make_shared<const structured::TokenVocabulary>(
      engine::vocabulary_from_tokenizer(**tok));
  MaskBenchOptions opts;
  opts.dir = f.data;
  opts.limit = f.limit;
  opts.stride = f.stride;
  opts.precompute = f.grammar_precompute == "first"  ? MaskBenchPrecompute::kFirst
                    : f.grammar_precompute == "none" ? MaskBenchPrecompute::kNone
                                                     : MaskBenchPrecompute::kBackground;
  opts.step_ms = f.step_ms;
  opts.prefill_ms = f.prefill_ms;
  // The JSON modes: free whitespace between tokens (the schema compiler's default) and compact
  // (what generate and serve use). Each is walked and soundness-checked on its own.
  std::vector<bool> any_whitespace;
  if (f.json_mode == "both" || f.json_mode == "whitespace") any_whitespace.push_back(true);
  if (f.json_mode == "both" || f.json_mode == "compact") any_whitespace.push_back(false);
  if (any_whitespace.empty())
    return report_error(invalid_argument("--json-mode: '{}' is not whitespace, compact or both", f.json_mode));
  int unsound = 0;
  for (bool ws : any_whitespace) {
    opts.schema_opts.any_whitespace = ws;
    const char* mode = ws ? "whitespace" : "compact";
    auto res = run_mask_benchmark(vocab, opts);
    if (!res.is_ok()) return report_error(res.status());
    std::fprintf(stderr, "== JSON mode: %s ==\n%s\n", mode, res->report().c_str());
    const auto& t = res->total;
    unsound += t.wrongly_accepted + t.mask_mismatches;
    nlohmann::json j = {{"mode", "mask"},
                        {"json_mode", mode},
                        {"schemas", t.schemas},
                        {"compiled", t.compiled},
                        {"refused", t.refused},
                        {"wrongly_accepted", t.wrongly_accepted},
                        {"wrongly_rejected", t.wrongly_rejected},
                        {"ill_formed_utf8_walked", t.ill_formed_tests},
                        {"mask_mismatches", t.mask_mismatches},
                        {"compile_ms_p50", res->compile_ms.p50},
                        {"compile_ms_p99", res->compile_ms.p99},
                        {"grammar_precompute", f.grammar_precompute},
                        {"step_ms", f.step_ms},
                        {"prefill_ms", f.prefill_ms},
                        {"precompute_ms_p50", res->precompute_ms.p50},
                        {"precompute_ms_p99", res->precompute_ms.p99},
                        {"contexts_lazy", res->contexts_lazy},
                        {"trie_nodes_visited", res->trie_nodes_visited},
                        {"mask_us_p50", res->mask_us.p50},
                        {"mask_us_p99", res->mask_us.p99},
                        {"mask_us_mean", res->mask_us.mean},
                        {"masks", res->mask_us.n}};
    std::printf("%s\n", j.dump().c_str());
  }
  // A wrongly accepted instance or a mask/matcher disagreement is a failed soundness check.
  if (unsound) {
    std::fprintf(stderr, "deepinfer: bench --mode mask: %d unsound results (see WRONGLY ACCEPTED / mask!)\n", unsound);
    return kExitRuntimeError;
  }
  return kExitOk;
}

// A comma-separated list of positive integers up to `max` (flag names the option in errors).
Result<std::vector<int>> parse_int_list(const std::string& s, const char* flag, int max) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size() || v <= 0 || v > max) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return invalid_argument("{}: '{}' is not an integer in [1, {}]", flag, item, max);
    }
  }
  if (out.empty()) return invalid_argument("{}: empty list", flag);
  return out;
}

// Models that time their forward by part (DeepSeek-V3: attention, MoE, dense MLP) get each
// part's share of the measured window's forward time, "rest" being embedding, norms and head.
void add_forward_part_shares(const std::vector<std::pair<std::string, double>>& end,
                             const std::vector<std::pair<std::string, double>>& from, nlohmann::json& j) {
  if (end.empty() || end.size() != from.size()) return;
  double total = 0, parts = 0;
  for (size_t i = 0; i < end.size(); ++i)
    if (end[i].first == "total") total = end[i].second - from[i].second;
  if (total <= 0) return;
  nlohmann::json shares = nlohmann::json::object();
  for (size_t i = 0; i < end.size(); ++i) {
    if (end[i].first == "total") continue;
    const double secs = end[i].second - from[i].second;
    shares[end[i].first] = secs / total;
    parts += secs;
  }
  shares["rest"] = std::max(0.0, total - parts) / total;
  j["forward_share"] = shares;
}

nlohmann::json measure(engine::Engine& engine, const std::string& mode, int batch, int prompt_len,
                       int gen_len) {
  const int32_t vocab = static_cast<int32_t>(engine.model_config().vocab_size);
  const bool prefill = mode == "prefill";
  const int max_tokens = prefill ? 1 : gen_len;
  // Sequences that do not fit the pool at once would run in waves and the window would time
  // something else than `batch` sequences decoding together.
  const int bs = engine::EngineConfig{}.block_size;  // make_engine keeps the default
  const int64_t blocks_needed = int64_t{batch} * ((prompt_len + max_tokens + bs - 1) / bs + 1);
  if (blocks_needed > engine.kv_num_blocks())
    return {{"error", fmt::format("batch {} x {} tokens needs about {} KV blocks, the pool has {}: raise --kv-cache-gb",
                                  batch, prompt_len + max_tokens, blocks_needed, engine.kv_num_blocks())}};
  const double t0 = now_seconds();
  for (int b = 0; b < batch; ++b) {
    engine::GenerationRequest r;
    r.prompt_ids = synthetic_prompt(prompt_len, b, vocab);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    auto id = engine.add_request(r);
    if (!id.is_ok()) return {{"error", id.status().message()}};
  }
  int64_t have_first = 0;  // tokens generated when the window opens
  double all_first = 0, first_any = 0;
  int64_t generated = 0;
  const engine::EngineStats at_start = engine.stats();
  engine::EngineStats at_first = at_start;
  auto parts_from = engine.forward_part_seconds();
  // The decode window starts once every sequence has its first token: with continuous
  // batching the first sequences decode while later ones still prefill, and a window opened
  // by the count of tokens alone would include their prefill (issue 32).
  std::set<int64_t> have_token;
  while (engine.has_unfinished()) {
    for (const auto& out : engine.step()) {
      generated += static_cast<int64_t>(out.new_token_ids.size());
      if (!out.new_token_ids.empty()) have_token.insert(out.request_id);
    }
    if (first_any == 0 && generated > 0) first_any = now_seconds();
    if (all_first == 0 && static_cast<int>(have_token.size()) >= batch) {
      all_first = now_seconds();
      have_first = generated;
      at_first = engine.stats();
      if (!prefill) parts_from = engine.forward_part_seconds();
    }
  }
  const double t1 = now_seconds();
  // Share of the measured window's step time in which the compute threads waited for the CPU
  // side (decode: from every sequence's first token on).
  const engine::EngineStats& end = engine.stats();
  const engine::EngineStats& from = prefill ? at_start : at_first;
  const double idle = end.idle_seconds - from.idle_seconds;
  const double fwd = end.forward_seconds - from.forward_seconds;
  nlohmann::json j;
  j["mode"] = mode;
  j["batch"] = batch;
  j["prompt_tokens"] = prompt_len;
  j["threads"] = engine.num_threads();
  j["overlap"] = engine.overlap_scheduling();
  j["idle_share"] = idle + fwd > 0 ? idle / (idle + fwd) : 0.0;
  j["steps"] = end.steps - from.steps;
  if (prefill) {
    const double secs = t1 - t0;
    j["tokens_per_s"] = batch * static_cast<double>(prompt_len) / secs;
    j["per_seq_tokens_per_s"] = static_cast<double>(prompt_len) / secs;
    j["ttft_ms"] = (first_any - t0) * 1e3;
  } else {
    const double secs = t1 - all_first;
    // Tokens whose forward ran inside the window. With overlap scheduling outputs arrive one
    // step late, so the step that returns the first tokens has already run the next forward:
    // counting outputs would credit the window with one forward it did not contain.
    const int64_t forwards = end.steps - at_first.steps;
    const double decoded =
        static_cast<double>(std::min<int64_t>(generated - have_first, forwards * batch));
    j["gen_tokens"] = gen_len;
    // The phase before the window: every prompt prefilled (and the first sequences' early
    // decode steps), reported apart so the decode figure holds decode alone.
    j["prefill_tokens_per_s"] = batch * static_cast<double>(prompt_len) / (all_first - t0);
    j["tokens_per_s"] = decoded / secs;
    j["per_seq_tokens_per_s"] = decoded / secs / batch;
    j["ttft_ms"] = (first_any - t0) * 1e3;
  }
  add_forward_part_shares(engine.forward_part_seconds(), parts_from, j);
  return j;
}

// --mode plot: the chart of earlier measurements (--plot-with files), nothing measured.
int run_plot_only(const BenchFlags& f) {
  if (f.plot.empty() || !plot_format_supported(f.plot))
    return report_error(invalid_argument("--mode plot: needs --plot FILE.svg or FILE.png"));
  if (f.plot_with.empty()) return report_error(invalid_argument("--mode plot: needs at least one --plot-with FILE"));
  std::vector<nlohmann::json> rows;
  std::string mode;
  for (const auto& file : f.plot_with) {
    auto more = read_plot_rows(file);
    if (!more.is_ok()) return report_error(more.status());
    for (const auto& r : *more)
      if (mode.empty() && r.contains("mode") && r["mode"].is_string()) mode = r["mode"].get<std::string>();
    rows.insert(rows.end(), more->begin(), more->end());
  }
  Status st = write_throughput_plot(f.plot, mode.empty() ? "decode" : mode, rows);
  if (!st.is_ok()) return report_error(st);
  return kExitOk;
}

int run_bench(BenchFlags& f) {
  if (!f.plot_with.empty() && f.mode != "prefill" && f.mode != "decode" && f.mode != "plot")
    return report_error(invalid_argument("--plot-with: only --mode prefill, decode or plot draw other rows (got '{}')", f.mode));
  if (f.mode == "membw") {
    for (int t : {1, 2}) {
      nlohmann::json j;
      j["mode"] = "membw";
      j["threads"] = t;
      j["read_gb_per_s"] = measure_read_bandwidth_gbs(t);
      std::printf("%s\n", j.dump().c_str());
    }
    return kExitOk;
  }
  if (f.mode == "mask") return run_mask_bench(f);
  if (f.mode == "schema-compile") return run_schema_compile_bench({f.data, f.limit, f.stride, f.repeat});
  if (f.mode == "kvstore") {
    auto lens = parse_int_list(f.prompt_lens, "--prompt-lens", 1 << 20);
    if (!lens.is_ok()) return report_error(lens.status());
    KvStoreBenchOptions o;
    o.engine = f.engine;
    o.prompt_lens = *lens;
    o.repeat = f.repeat;
    return run_kvstore_ttft_bench(o);
  }
  if (f.mode == "prefix-restore") {
    auto lens = parse_int_list(f.prompt_lens, "--prompt-lens", 1 << 20);
    if (!lens.is_ok()) return report_error(lens.status());
    return run_prefix_restore_bench({f.engine, *lens, f.gen_len, f.repeat, f.context_baseline});
  }
  if (f.mode == "vision") return run_vision_bench({f.engine, f.image, f.repeat});
  if (f.mode == "tokenize") return run_tokenize_bench({f.engine.model, f.megabytes, f.repeat});
  if (f.mode == "kvstore-io")
    return run_kvstore_io_bench({f.engine.kv_store, f.block_kib, static_cast<size_t>(f.megabytes)});
  if (f.mode == "kv-transfer") {
    auto sizes = parse_int_list(f.transfer_bytes, "--transfer-bytes", 1 << 30);
    if (!sizes.is_ok()) return report_error(sizes.status());
    KvTransferBenchOptions o;
    o.message_bytes.assign(sizes->begin(), sizes->end());
    o.messages = f.transfer_messages;
    o.repeat = f.repeat;
    return run_kv_transfer_bench(o);
  }
  if (f.mode == "spec") {
    auto b = parse_int_list(f.batches.empty() ? "1,8,32" : f.batches, "--batch", 4096);
    if (!b.is_ok()) return report_error(b.status());
    return run_spec_bench({f.engine, *b, f.gen_len, f.spec_tasks, f.plot, f.spec_configs, f.spec_trace});
  }
  if (f.mode == "attention") {
    auto b = parse_int_list(f.batches.empty() ? "1,16" : f.batches, "--batch", 4096);
    if (!b.is_ok()) return report_error(b.status());
    auto c = parse_int_list(f.prompt_len, "--prompt-len", 1 << 20);
    if (!c.is_ok()) return report_error(c.status());
    AttentionBenchOptions o;
    o.batches = *b;
    o.contexts = *c;
    o.kv_dtype = f.engine.kv_cache_dtype;
    o.threads = f.engine.threads;
    return run_attention_bench(o);
  }
  if (f.mode == "plot") return run_plot_only(f);
  if (f.mode != "prefill" && f.mode != "decode" && f.mode != "serve" && f.mode != "matmul")
    return report_error(invalid_argument(
        "bench: unknown --mode '{}' (prefill|decode|serve|spec|tokenize|membw|matmul|attention|mask|schema-compile|kvstore|kvstore-io|kv-transfer|prefix-restore|vision|plot)",
        f.mode));
  if (!f.plot_with.empty() && f.plot.empty())
    return report_error(invalid_argument("--plot-with: needs --plot FILE to draw into"));
  const std::string default_batches = f.mode == "matmul" ? "1,256" : "1";
  auto batches = parse_int_list(f.batches.empty() ? default_batches : f.batches, "--batch", 4096);
  if (!batches.is_ok()) return report_error(batches.status());
  if (f.mode == "matmul")
    return run_matmul_bench({f.matmul_shapes, *batches, f.engine.threads, f.engine.batch_invariant});
  if (!f.plot.empty() && !plot_format_supported(f.plot))
    return report_error(invalid_argument("--plot: '{}' must end in .png or .svg", f.plot));
  auto prompt_lens = parse_int_list(f.prompt_len, "--prompt-len", 1 << 20);
  if (!prompt_lens.is_ok()) return report_error(prompt_lens.status());
  if (f.mode == "serve") {
    if (prompt_lens->size() != 1)
      return report_error(invalid_argument("--prompt-len: --mode serve takes one length, got '{}'", f.prompt_len));
    ServeBenchOptions o;
    o.engine = f.engine;
    o.batches = *batches;
    o.prompt_len = prompt_lens->front();
    o.gen_len = f.gen_len;
    o.repeat = f.repeat;
    o.plot = f.plot;
    if (!f.disaggregated.empty()) {
      auto pd = parse_int_list(f.disaggregated, "--disaggregated", 64);
      if (!pd.is_ok()) return report_error(pd.status());
      if (pd->size() != 2)
        return report_error(invalid_argument("--disaggregated: P,D (prefill and decode engines), got '{}'", f.disaggregated));
      o.disaggregated_prefill = (*pd)[0];
      o.disaggregated_decode = (*pd)[1];
    }
    return run_serve_bench(o);
  }
  auto loaded = load_model_for_cli(f.engine.model);
  if (!loaded.is_ok()) return report_error(loaded.status());
  int max_batch = 0;
  for (int b : *batches) max_batch = std::max(max_batch, b);
  EngineFlags ef = f.engine;
  ef.enable_prefix_caching = false;  // repeated synthetic prompts must not hit the cache
  ef.max_num_seqs = std::max(ef.max_num_seqs, max_batch);
  auto eng = make_engine(*loaded, ef);
  if (!eng.is_ok()) return report_error(eng.status());
  std::vector<nlohmann::json> results;
  // One warm-up pass so page faults and first-touch costs stay out of the numbers.
  measure(**eng, f.mode, 1, std::min(prompt_lens->front(), 32), 4);
  for (int len : *prompt_lens) {
    for (int b : *batches) {
      for (int rep = 0; rep < f.repeat; ++rep) {
        nlohmann::json j = measure(**eng, f.mode, b, len, f.gen_len);
        if (j.contains("error")) return report_error(invalid_argument("bench: {}", j["error"].get<std::string>()));
        j["model"] = loaded->name;
        j["kv_cache_dtype"] = f.engine.kv_cache_dtype;
        std::printf("%s\n", j.dump().c_str());
        std::fflush(stdout);
        results.push_back(j);
      }
    }
  }
  if (!f.plot.empty()) {
    for (const auto& file : f.plot_with) {
      auto rows = read_plot_rows(file);
      if (!rows.is_ok()) return report_error(rows.status());
      results.insert(results.end(), rows->begin(), rows->end());
    }
    Status st = write_throughput_plot(f.plot, f.mode, results);
    if (!st.is_ok()) return report_error(st);
  }
  return kExitOk;
}

}  // namespace

Subcommand make_bench_command() {
  auto f = std::make_shared<BenchFlags>();
  f->engine.max_num_seqs = 1;
  Subcommand s;
  s.add = [f](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("bench", "Measure prefill / decode throughput (JSON lines on stdout)");
    add_engine_flags(*cmd, f->engine);
    cmd->add_option("--mode", f->mode,
                    "prefill | decode | membw (memory read bandwidth, the decode roofline) | "
                    "serve (the HTTP server from outside: --batch concurrent streaming clients) | "
                    "spec (speculative decoding off / fixed k / DSpark on repetitive tasks; default --batch 1,8,32) | "
                    "tokenize (encode speed on --megabytes of mixed text) | "
                    "mask (structured-output compile and mask time over JSONSchemaBench) | "
                    "matmul (one matmul kernel call: --matmul-shape, rows from --batch, both precisions) | "
                    "attention (decode attention alone at the default model's shapes: --batch sequences of --prompt-len keys each, --kv-cache-dtype, blocks shuffled, 30 layers' caches cycled) | "
                    "schema-compile (JSON Schema to grammar IR only, --repeat times per file of --data) | "
                    "kvstore (time to first token cold vs a hit in each KV tier; needs --kv-store) | "
                    "kvstore-io (the KV store's put/get GB/s next to raw direct I/O of the same files) | "
                    "kv-transfer (the UCX KV transfer from this process to a forked receiver, GB/s per "
                    "--transfer-bytes, next to ucx_perftest -t tag_bw on 127.0.0.1 when it is on PATH) | "
                    "prefix-restore (DeepSeek-V4: restore time of a cached prefix, bounded replay vs "
                    "exact vs full prefill, and the bounded restore's drift; --prompt-lens, --gen-len, --repeat) | "
                    "vision (multimodal models: images/s through the vision encoder and the TTFT of an --image "
                    "prompt, cold and with the embedding and prefix caches warm; --repeat) | "
                    "plot (nothing measured: draws the --plot-with rows into --plot)");
    cmd->add_option("--image", f->image, "vision: the image file (JPEG, PNG or WebP)");
    cmd->add_option("--matmul-shape", f->matmul_shapes,
                    "matmul: TYPE:OUTxIN, repeatable; TYPE a GGUF type or fp8 / fp4 (DeepSeek's block-scaled "
                    "formats) (default: SmolLM2-135M's q4_1:1536x576, q4_1:576x1536 and q8_0:49152x576)");
    cmd->add_option("--block-kib", f->block_kib, "kvstore-io: KiB per KV block (default 1024)")
        ->check(CLI::Range(16, 1 << 20));
    cmd->add_option("--transfer-bytes", f->transfer_bytes,
                    "kv-transfer: message sizes in bytes, comma-separated (default 4194304 = 4 MiB)");
    cmd->add_option("--transfer-messages", f->transfer_messages,
                    "kv-transfer: messages per size (default 0 = about 256 MiB worth, 16 to 4096)")
        ->check(CLI::Range(0, 1000000));
    cmd->add_option("--prompt-lens", f->prompt_lens,
                    "kvstore, prefix-restore: prompt lengths in tokens, comma-separated (default 2000,8000)");
    cmd->add_flag("--context-baseline", f->context_baseline,
                  "prefix-restore: also compute each prompt with one token changed just before the "
                  "replayed span and report that drift (how far outputs move with unseen context)");
    cmd->add_option("--data", f->data, "mask: JSONSchemaBench directory; schema-compile: that or one schema file");
    cmd->add_option("--megabytes", f->megabytes,
                    "tokenize: MB of text per measurement; kvstore-io: MiB written then read (at least 32 blocks)")
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--limit", f->limit, "mask, schema-compile: at most this many schemas (0 = all)")->check(CLI::Range(0, 1000000));
    cmd->add_option("--stride", f->stride, "mask, schema-compile: every N-th schema file")->check(CLI::Range(1, 1000000));
    cmd->add_option("--json-mode", f->json_mode,
                    "mask: 'both' (default), 'whitespace' (free whitespace between tokens) or 'compact' "
                    "(no free whitespace, as generate and serve use)")
        ->check(CLI::IsMember({"both", "whitespace", "compact"}));
    cmd->add_option("--grammar-precompute", f->grammar_precompute,
                    "mask: 'background' (as the engine: a grammar is ready once built, its contexts are "
                    "classified on the compiler's background thread; compile time = time to ready) or "
                    "'first' (classify everything before the first mask) or 'none' (no precompute: each "
                    "context is classified by the first mask that needs it; the path of a mask that "
                    "overtakes the precompute, with work independent of thread timing)")
        ->check(CLI::IsMember({"background", "first", "none"}));
    cmd->add_option("--step-ms", f->step_ms,
                    "mask: sleep this long before each mask, standing in for a decode step's forward pass")
        ->check(CLI::Range(0.0, 1000.0));
    cmd->add_option("--prefill-ms", f->prefill_ms,
                    "mask: sleep this long once between a grammar being ready and its first mask, standing in "
                    "for the request's prefill (the background precompute runs meanwhile)")
        ->check(CLI::Range(0.0, 10000.0));
    cmd->add_option("--batch", f->batches, "Batch sizes, comma-separated (e.g. 1,2,4,8); matmul: activation rows per call (default 1,256)");
    cmd->add_option("--prompt-len", f->prompt_len,
                    "Prompt tokens per sequence; prefill and decode take a comma list and sweep it (e.g. 1024,4096)");
    cmd->add_option("--gen-len", f->gen_len, "Generated tokens per sequence (decode)")->check(CLI::Range(2, 1 << 20));
    cmd->add_option("--repeat", f->repeat, "Measurements per batch size (schema-compile: compiles per file; kv-transfer: per message size)")->check(CLI::Range(1, 100));
    cmd->add_option("--spec-task", f->spec_tasks,
                    "spec: tasks to run, comma-separated: code-edit, json-extract (n-gram drafter), chat "
                    "(draft-model drafter: --draft-model, default the model itself) (default: all)");
    cmd->add_option(
        "--spec-configs", f->spec_configs,
        "spec: configurations to run, comma-separated: off, fixed, dspark (default: all three)");
    cmd->add_option("--spec-trace", f->spec_trace,
                    "spec: write PREFIX.TASK.bBATCH.CONFIG.jsonl, one JSON line per verification (each draft's "
                    "signals and n-gram features, verified, accepted; requests ask for logprobs), for "
                    "bench/spec_trace_replay.py");
    cmd->add_option("--plot", f->plot,
                    "Draw the results to FILE.svg or FILE.png: per-sequence vs total throughput (prefill, "
                    "decode, serve); tokens/s against batch size per configuration (spec)");
    cmd->add_option("--plot-with", f->plot_with,
                    "Also draw the rows of this JSON-lines file (repeatable): bench's own output or "
                    "bench/compare_llamacpp.py --rows-out (llama.cpp beside us); a row's \"engine\" names its curve. "
                    "--mode plot draws only these rows, measuring nothing");
    cmd->add_option("--disaggregated", f->disaggregated,
                    "--mode serve: P,D also measures P prefill + D decode engines (deepinfer cluster, each on half "
                    "of --threads) after the all-in-one server, side by side");
    return cmd;
  };
  s.run = [f] { return run_bench(*f); };
  return s;
}

}  // namespace deepinfer::tools
