// `deepinfer generate`: one prompt or a batch, offline. All prompts run concurrently through
// the engine (continuous batching); results come out in input order.
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/base/timer.h"
#include "deepinfer/parallel/expert_trace.h"
#include "deepinfer/recipe/chat.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/generate_ep.h"
#include "deepinfer/tools/generate_input.h"
#include "deepinfer/tools/subcommands.h"

namespace deepinfer::tools {
namespace {

struct GenerateFlags {
  EngineFlags engine;
  SamplingFlags sampling;
  std::vector<std::string> prompts;
  std::string input, output;
  bool chat = false;
  bool no_chat = false;
  bool json = false;
  bool stats = false;
  std::string json_schema, regex, grammar;
  std::string expert_trace;
  int expert_trace_window = 16;
  EpFlags ep;
};

struct Result1 {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<engine::LogprobEntry> logprobs;
  engine::FinishReason finish = engine::FinishReason::kNone;
  std::string error;
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, replayed_tokens = 0;
  bool want_logprobs = false;
};

nlohmann::json to_json(size_t index, const Result1& r) {
  nlohmann::json j;
  j["index"] = index;
  j["text"] = r.text;
  j["token_ids"] = r.token_ids;
  // A grammar dead end keeps its own reason (with the error): the text is not a full answer.
  const bool own_reason = r.error.empty() || r.finish == engine::FinishReason::kGrammarDeadEnd;
  j["finish_reason"] = std::string(own_reason ? engine::to_string(r.finish) : "error");
  if (!r.error.empty()) j["error"] = r.error;
  j["usage"] = {{"prompt_tokens", r.prompt_tokens},
                {"completion_tokens", r.completion_tokens},
                {"cached_tokens", r.cached_tokens}};
  if (r.replayed_tokens > 0) j["usage"]["replayed_tokens"] = r.replayed_tokens;
  if (r.want_logprobs) {
    nlohmann::json lp = nlohmann::json::array();
    for (const auto& t : r.logprobs) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [id, p] : t.top) top.push_back({id, p});
      lp.push_back({{"token_id", t.token_id}, {"logprob", t.logprob}, {"top", top}});
    }
    j["logprobs"] = lp;
  }
  return j;
}

Result<std::string> read_text_file(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) return invalid_argument("{} {}: cannot open", flag, path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// At most one of --json-schema / --regex / --grammar; compact JSON (no free whitespace), so a
// small model cannot wander into endless spaces.
Result<std::optional<structured::GrammarSpec>> grammar_from_flags(const GenerateFlags& f) {
  const int given = !f.json_schema.empty() + !f.regex.empty() + !f.grammar.empty();
  if (given > 1) return invalid_argument("give only one of --json-schema, --regex, --grammar");
  if (given == 0) return std::optional<structured::GrammarSpec>();
  structured::GrammarSpec spec;
  spec.opts.any_whitespace = false;
  if (!f.json_schema.empty()) {
    spec.kind = structured::GrammarSpec::kJsonSchema;
    DI_ASSIGN_OR_RETURN(spec.source, read_text_file(f.json_schema, "--json-schema"));
  } else if (!f.regex.empty()) {
    spec.kind = structured::GrammarSpec::kRegex;
    spec.source = f.regex;
  } else {
    spec.kind = structured::GrammarSpec::kEbnf;
    DI_ASSIGN_OR_RETURN(spec.source, read_text_file(f.grammar, "--grammar"));
  }
  return std::optional<structured::GrammarSpec>(std::move(spec));
}

// --ep: rank 0 gathers every rank's results (JSON lines) and prints them in input order.
int finish_ep(parallel::EpGroup& ep, const GenerateFlags& f, const std::vector<Result1>& results, double elapsed) {
  std::string mine;
  for (size_t i = size_t(ep.rank()); i < results.size(); i += size_t(ep.size()))
    mine += to_json(i, results[i]).dump() + "\n";
  const std::vector<std::string> parts = ep.gather_to_root(mine);
  if (ep.rank() != 0) return kExitOk;
  std::vector<nlohmann::json> all(results.size());
  for (const std::string& part : parts) {
    for (size_t pos = 0; pos < part.size();) {
      const size_t end = part.find('\n', pos);
      nlohmann::json j = nlohmann::json::parse(part.substr(pos, end - pos));
      const size_t index = j["index"].get<size_t>();
      all[index] = std::move(j);
      pos = end + 1;
    }
  }
  std::ofstream out_file;
  if (!f.output.empty()) {
    out_file.open(f.output);
    if (!out_file) return report_error(io_error("{}: cannot open for writing", f.output));
  }
  int failures = 0, prompt = 0, gen = 0;
  std::string first_error;
  for (size_t i = 0; i < all.size(); ++i) {
    const nlohmann::json& j = all[i];
    if (j.contains("error") && failures++ == 0) first_error = j["error"].get<std::string>();
    prompt += j["usage"]["prompt_tokens"].get<int>();
    gen += j["usage"]["completion_tokens"].get<int>();
    if (out_file.is_open()) out_file << j.dump() << "\n";
    if (f.json) {
      std::printf("%s\n", j.dump().c_str());
    } else if (!out_file.is_open()) {
      if (all.size() > 1) std::printf("--- [%zu]\n", i);
      std::printf("%s\n", j["text"].get<std::string>().c_str());
    }
  }
  if (f.stats)
    std::fprintf(stderr, "stats: %zu requests over %d expert-parallel ranks, %d prompt tokens, %d generated, %.2f s\n",
                 all.size(), ep.size(), prompt, gen, elapsed);
  if (failures) {
    std::fprintf(stderr, "deepinfer: %d of %zu requests failed: %s\n", failures, all.size(), first_error.c_str());
    return kExitRuntimeError;
  }
  return kExitOk;
}

int run_generate(GenerateFlags& f) {
  auto grammar = grammar_from_flags(f);
  if (!grammar.is_ok()) return report_error(grammar.status());
  if (f.prompts.empty() && f.input.empty())
    return report_error(invalid_argument("give --prompt TEXT or --input FILE.jsonl"));
  if (f.chat && f.no_chat) return report_error(invalid_argument("give --chat or --no-chat, not both"));

  f.ep.eplb_interval = 0;  // no live EPLB offline: --ep-redundant needs --eplb-trace
  const bool ep_ranks = f.ep.ep > 1 && parallel::EpGroup::launched_by_mpirun();
  if (f.ep.ep > 1 && !f.expert_trace.empty())
    return report_error(invalid_argument("--expert-trace records with --ep 1 (routing does not depend on --ep)"));
  if (f.ep.ep > 1 && f.engine.overlap == "on") return report_error(invalid_argument("--ep needs --overlap off"));
  // The MTP layer's experts would be driven from rank 0 between steps: not tried under mpirun.
  if (f.ep.ep > 1 && f.engine.speculative == "mtp")
    return report_error(unsupported("--speculative mtp with --ep is not built yet; use --speculative ngram"));
  // Under mpirun every rank meets the same errors: rank 0 alone says so.
  auto fail = [quiet = ep_ranks && is_secondary_rank()](const Status& st) {
    return quiet ? (st.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntimeError) : report_error(st);
  };
  auto loaded = load_model_for_cli(f.engine.model);
  if (!loaded.is_ok()) return fail(loaded.status());
  if (f.ep.ep > 1 && !ep_ranks) {
    // Refuse what the ranks would refuse before starting them.
    Status st = check_ep_model(f.ep, *loaded);
    if (!st.is_ok()) return report_error(st);
    if (!parallel::EpGroup::available()) return report_error(parallel::EpGroup::init(f.ep.ep).status());
    return spawn_mpirun(f.ep.ep);
  }
  std::unique_ptr<parallel::EpGroup> ep;
  if (ep_ranks) {
    auto joined = join_ep(f.ep, *loaded, f.engine);
    if (!joined.is_ok()) return fail(joined.status());
    ep = std::move(*joined);
  }
  const std::string arch = loaded->model->config().architecture;  // a copy: make_engine takes the model
  const int n_group = loaded->model->config().n_group;
  if (!f.expert_trace.empty() && loaded->model->expert_token_counts().empty())
    return report_error(invalid_argument("--expert-trace: model '{}' ({}) routes no experts", f.engine.model, arch));
  const bool chat = f.chat || (!f.no_chat && recipe::has_chat_encoding(*loaded->tokenizer, arch));
  engine::GenerationRequest defaults = make_request(f.sampling);
  defaults.grammar = *grammar;

  std::vector<engine::GenerationRequest> requests;
  for (const auto& p : f.prompts) {
    auto ids = encode_prompt(*loaded->tokenizer, arch, p, chat);
    if (!ids.is_ok()) return fail(ids.status());
    engine::GenerationRequest r = defaults;
    r.prompt_ids = std::move(*ids);
    requests.push_back(std::move(r));
  }
  // Multimodal models: images in --input's messages, encoded on a pool of their own.
  ThreadPool vision_pool(loaded->vision ? 0 : 1);
  std::unique_ptr<vision::ImageService> images;
  if (loaded->vision) images = std::make_unique<vision::ImageService>(loaded->vision, &vision_pool);
  if (!f.input.empty()) {
    auto more = read_generate_input(f.input, *loaded->tokenizer, arch, defaults, chat, images.get());
    if (!more.is_ok()) return fail(more.status());
    for (auto& r : *more) requests.push_back(std::move(r));
  }

  auto eng = make_engine(*loaded, f.engine);
  if (!eng.is_ok()) return fail(eng.status());
  engine::Engine& engine = **eng;
  if (*grammar) {
    // A schema, regex or grammar that is malformed, refused or matches nothing is the caller's
    // input to fix: a usage error (exit 2), named by its flag, before anything is generated.
    Status st = engine.check_grammar(**grammar);
    if (!st.is_ok()) {
      const char* flag = !f.json_schema.empty() ? "--json-schema" : !f.regex.empty() ? "--regex" : "--grammar";
      const std::string& arg = !f.json_schema.empty() ? f.json_schema : !f.regex.empty() ? f.regex : f.grammar;
      return fail(invalid_argument("{} {}: {}", flag, arg, st.message()));
    }
  }

  std::vector<Result1> results(requests.size());
  std::map<int64_t, size_t> index_of;
  Status refused;
  for (size_t i = 0; i < requests.size(); ++i) {
    results[i].want_logprobs = requests[i].sampling.logprobs >= 0;
    if (ep && int(i % size_t(ep->size())) != ep->rank()) continue;  // another rank's request
    auto id = engine.add_request(requests[i]);
    // A request the engine refuses is bad input: say which one, before generating anything.
    if (!id.is_ok()) {
      const Status& st = id.status();
      const Status named =
          requests.size() == 1 ? st : Status(st.code(), fmt::format("request {}: {}", i, st.message()));
      if (!ep) return report_error(named);
      refused = refused.is_ok() ? named : refused;
      continue;
    }
    index_of[*id] = i;
  }
  // With --ep each rank checked its own share: no rank starts unless all agree.
  if (ep && !ep->all(refused.is_ok())) return refused.is_ok() ? kExitUsage : report_error(refused);
  std::optional<parallel::ExpertTraceRecorder> trace;
  if (!f.expert_trace.empty()) trace.emplace(f.engine.model, n_group, f.expert_trace_window);
  const bool stream = requests.size() == 1 && !f.json && f.output.empty() && !ep;
  const double t0 = now_seconds();
  double first_token_time = 0;
  // With --ep, ranks step in lockstep until every rank is done (a rank without work still serves
  // the others' MoE layers from the barrier).
  for (;;) {
    if (!engine.has_unfinished()) {
      if (!ep || !ep->step_barrier(false)) break;
      continue;
    }
    const std::vector<engine::RequestOutput> outputs = engine.step();
    if (trace) trace->step(engine.expert_token_counts());
    for (const engine::RequestOutput& out : outputs) {
      Result1& r = results[index_of.at(out.request_id)];
      if (first_token_time == 0 && !out.new_token_ids.empty()) first_token_time = now_seconds();
      r.token_ids.insert(r.token_ids.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      r.text += out.new_text;
      r.logprobs.insert(r.logprobs.end(), out.new_logprobs.begin(), out.new_logprobs.end());
      if (stream && !out.new_text.empty()) {
        std::fwrite(out.new_text.data(), 1, out.new_text.size(), stdout);
        std::fflush(stdout);
      }
      if (out.finished) {
        r.finish = out.finish_reason;
        r.error = out.error;
        r.prompt_tokens = out.prompt_tokens;
        r.completion_tokens = out.completion_tokens;
        r.cached_tokens = out.cached_tokens;
        r.replayed_tokens = out.replayed_tokens;
      }
    }
    if (ep && !ep->step_barrier(engine.has_unfinished())) break;
  }
  const double elapsed = now_seconds() - t0;
  if (ep) return finish_ep(*ep, f, results, elapsed);
  engine.flush_kv_store();
  if (trace) {
    std::ofstream tf(f.expert_trace);
    tf << parallel::expert_trace_to_json(trace->finish(engine.expert_token_counts()));
    if (!tf) return report_error(io_error("--expert-trace {}: cannot write", f.expert_trace));
  }

  std::ofstream out_file;
  if (!f.output.empty()) {
    out_file.open(f.output);
    if (!out_file) return report_error(io_error("{}: cannot open for writing", f.output));
  }
  int failures = 0;
  std::string first_error;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result1& r = results[i];
    if (!r.error.empty() && failures++ == 0) first_error = r.error;
    if (out_file.is_open()) out_file << to_json(i, r).dump() << "\n";
    if (f.json) {
      std::printf("%s\n", to_json(i, r).dump().c_str());
    } else if (stream) {
      std::printf("\n");
    } else if (out_file.is_open()) {
      // results went to the file
    } else {
      if (results.size() > 1) std::printf("--- [%zu]\n", i);
      std::printf("%s\n", r.text.c_str());
    }
  }
  if (f.stats) {
    int prompt = 0, gen = 0, cached = 0;
    for (const auto& r : results) prompt += r.prompt_tokens, gen += r.completion_tokens, cached += r.cached_tokens;
    std::fprintf(stderr,
                 "stats: %zu requests, %d prompt tokens (%d cached), %d generated, %.2f s, "
                 "%.1f generated tok/s, time to first token %.1f ms\n",
                 results.size(), prompt, cached, gen, elapsed, gen / std::max(elapsed, 1e-9),
                 first_token_time > 0 ? (first_token_time - t0) * 1e3 : 0.0);
    const auto& kv = engine.kv_stats();
    std::fprintf(stderr, "stats: prefix cache hits: %lld tokens from RAM, %lld from the KV store\n",
                 static_cast<long long>(kv.memory_hit_tokens), static_cast<long long>(kv.tier_hit_tokens));
    if (const auto* sp = engine.spec_stats()) {
      std::fprintf(stderr,
                   "stats: speculative: %lld drafted, %lld verified, %lld accepted (%.1f%% of verified) "
                   "over %lld steps, %.2f accepted per verifying step, %.2f s drafting\n",
                   static_cast<long long>(sp->drafted), static_cast<long long>(sp->verified),
                   static_cast<long long>(sp->accepted),
                   sp->verified > 0 ? 100.0 * double(sp->accepted) / double(sp->verified) : 0.0,
                   static_cast<long long>(sp->steps),
                   sp->steps > 0 ? double(sp->accepted) / double(sp->steps) : 0.0, sp->draft_seconds);
    }
  }
  if (failures) {
    std::fprintf(stderr, "deepinfer: %d of %zu requests failed: %s\n", failures, results.size(),
                 first_error.c_str());
    return kExitRuntimeError;
  }
  return kExitOk;
}

}  // namespace

Subcommand make_generate_command() {
  auto flags = std::make_shared<GenerateFlags>();
  Subcommand s;
  s.add = [flags](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("generate", "Generate text for one prompt or a batch, offline");
    add_engine_flags(*cmd, flags->engine);
    add_sampling_flags(*cmd, flags->sampling, engine::Defaults::kGenerate);
    add_ep_flags(*cmd, flags->ep);
    cmd->add_option("--prompt,-p", flags->prompts, "Prompt text (repeatable)");
    cmd->add_option("--input", flags->input,
                    "JSONL file: one {\"prompt\"|\"messages\"|\"prompt_token_ids\": ...} per line, "
                    "optionally with its own sampling fields");
    cmd->add_option("--output", flags->output, "Write one JSON result per line to this file");
    cmd->add_flag("--chat", flags->chat,
                  "Apply the chat template to --prompt (default: on when the model has one)");
    cmd->add_flag("--no-chat", flags->no_chat, "Use --prompt as raw text");
    cmd->add_flag("--json", flags->json, "Print one JSON object per result");
    cmd->add_flag("--stats", flags->stats, "Print token counts and tokens/s to stderr");
    cmd->add_option("--json-schema", flags->json_schema, "Constrain output to a JSON Schema file");
    cmd->add_option("--regex", flags->regex, "Constrain output to a regular expression");
    cmd->add_option("--grammar", flags->grammar, "Constrain output to an EBNF (GBNF-style) grammar file");
    cmd->add_option("--expert-trace", flags->expert_trace,
                    "MoE models: write the tokens routed to each expert (per layer, in total and per window "
                    "of steps) to this JSON file, for `deepinfer eplb plan`");
    cmd->add_option("--expert-trace-window", flags->expert_trace_window,
                    "Engine steps per window in --expert-trace (0 = totals only; default 16)")
        ->check(CLI::Range(0, 1 << 30));
    cmd->footer(
        "Greedy by default (--temperature 0): the same prompt gives the same answer, as a tool that "
        "answers questions should; give --temperature (and --seed) to sample. --input lines start "
        "from these flags. See docs/sampling.md.");
    return cmd;
  };
  s.run = [flags] { return run_generate(*flags); };
  return s;
}

}  // namespace deepinfer::tools
