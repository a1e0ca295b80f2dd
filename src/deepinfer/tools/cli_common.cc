#include "deepinfer/tools/cli_common.h"

#include <cstdio>
#include <filesystem>

#include "deepinfer/kvstore/content_digest.h"
#include "deepinfer/kvstore/ttl_spec.h"
#include "deepinfer/model/catalog.h"
#include "deepinfer/model/format/gguf.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/model_path.h"
#include "deepinfer/recipe/chat.h"

namespace deepinfer::tools {

int report_error(const Status& status) {
  std::fprintf(stderr, "deepinfer: %s\n", status.message().c_str());
  return status.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntimeError;
}

Result<LoadedModel> load_model_for_cli(const std::string& model_arg) {
  DI_ASSIGN_OR_RETURN(model::ResolvedModel resolved, model::resolve_model(model_arg));
  LoadedModel out;
  out.name = resolved.name;
  out.path = resolved.path;
  model::WeightSource source;
  source.description = resolved.path;
  if (resolved.kind == model::ResolvedModel::Kind::kGguf) {
    DI_ASSIGN_OR_RETURN(auto gguf, format::GgufFile::open(resolved.path));
    source.gguf = gguf;
    DI_ASSIGN_OR_RETURN(auto tok, recipe::Tokenizer::from_gguf(*gguf));
    out.tokenizer = std::move(tok);
  } else {
    DI_ASSIGN_OR_RETURN(auto st, format::SafetensorsModel::open(resolved.path));
    source.safetensors = st;
    DI_ASSIGN_OR_RETURN(auto tok, recipe::Tokenizer::from_hf_dir(resolved.path));
    out.tokenizer = std::move(tok);
  }
  DI_ASSIGN_OR_RETURN(out.model, model::load_model(source));
  if (out.model->config().vocab_size < out.tokenizer->vocab_size())
    return corrupt("{}: the tokenizer has {} tokens but the model only {}", resolved.path,
                   out.tokenizer->vocab_size(), out.model->config().vocab_size);
  return out;
}

void add_sampling_flags(CLI::App& app, SamplingFlags& f) {
  app.add_option("--max-tokens", f.max_tokens, "Maximum tokens to generate")->check(CLI::Range(0, 1 << 20));
  app.add_option("--temperature", f.temperature, "Sampling temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
  app.add_option("--top-p", f.top_p, "Nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  app.add_option("--top-k", f.top_k, "Keep the K most likely tokens (0 = off)")->check(CLI::Range(0, 1 << 30));
  app.add_option("--min-p", f.min_p, "Drop tokens below this fraction of the top probability")->check(CLI::Range(0.0, 1.0));
  app.add_option("--repetition-penalty", f.repetition_penalty, "Repetition penalty (1 = off)")->check(CLI::Range(0.01, 100.0));
  app.add_option("--frequency-penalty", f.frequency_penalty, "OpenAI frequency penalty")->check(CLI::Range(-2.0, 2.0));
  app.add_option("--presence-penalty", f.presence_penalty, "OpenAI presence penalty")->check(CLI::Range(-2.0, 2.0));
  app.add_option("--seed", f.seed, "Random seed (same seed, same output)");
  app.add_option("--stop", f.stop, "Stop string (repeatable)");
  app.add_option("--logprobs", f.logprobs, "Report the top-N log-probabilities of each token")->check(CLI::Range(0, 20));
  app.add_flag("--ignore-eos", f.ignore_eos, "Keep generating after the end-of-sequence token");
}

engine::GenerationRequest make_request(const SamplingFlags& f) {
  engine::GenerationRequest r;
  r.max_tokens = f.max_tokens;
  r.sampling.temperature = f.temperature;
  r.sampling.top_p = f.top_p;
  r.sampling.top_k = f.top_k;
  r.sampling.min_p = f.min_p;
  r.sampling.repetition_penalty = f.repetition_penalty;
  r.sampling.frequency_penalty = f.frequency_penalty;
  r.sampling.presence_penalty = f.presence_penalty;
  if (f.seed >= 0) {
    r.sampling.seed = static_cast<uint64_t>(f.seed);
    r.sampling.has_seed = true;
  }
  r.sampling.logprobs = f.logprobs;
  r.stop = f.stop;
  r.ignore_eos = f.ignore_eos;
  return r;
}

void add_engine_flags(CLI::App& app, EngineFlags& f) {
  app.add_option("--model,-m", f.model,
                 "A .gguf file, a Hugging Face model directory, or a catalogue name "
                 "(default: smollm2-135m-instruct)");
  app.add_option("--threads,-t", f.threads, "Compute threads (default: one per core)")->check(CLI::Range(0, 1024));
  app.add_option("--max-num-seqs", f.max_num_seqs, "Most sequences decoded together")->check(CLI::Range(1, 4096));
  app.add_flag("--batch-invariant", f.batch_invariant,
               "Bitwise-identical results whatever else is in the batch");
  app.add_option("--matmul-precision", f.matmul_precision,
                 "high: float32 activations, matches the float reference (default); int8: 8-bit "
                 "activations like llama.cpp, faster decode, logits differ by up to ~1")
      ->check(CLI::IsMember({"high", "int8"}));
  app.add_option("--overlap", f.overlap,
                 "Overlap scheduling: schedule the next step and finish the previous one's "
                 "outputs while the forward runs (same results either way)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--kv-store", f.kv_store,
                 "KV store directory (repeatable; one storage target each, same order in every process)");
  app.add_option("--kv-store-ram-gb", f.kv_store_ram_gb,
                 "RAM tier of the KV store in GiB, between the KV cache and the --kv-store targets "
                 "(default 0.25); prefetched prefixes land here")
      ->check(CLI::Range(0.0, 65536.0));
  app.add_option("--kv-store-capacity-gb", f.kv_store_capacity_gb,
                 "Most GiB the KV store keeps on each --kv-store target; beyond it the sweeper "
                 "(every minute) evicts the entries with the least lifetime left (default: no limit)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--traffic-class", f.traffic_class,
                 "KV store lifetime class of requests that do not name one: agent (3 days) or "
                 "chat (7 days, default)")
      ->check(CLI::IsMember({"agent", "chat"}));
  app.add_option("--kv-store-ttl", f.kv_store_ttl,
                 "KV store lifetime per traffic class, e.g. agent=3d,chat=7d (s, m, h, d); a block "
                 "used by both classes keeps the longer one (default: agent=3d,chat=7d)");
}

Result<std::unique_ptr<engine::Engine>> make_engine(LoadedModel& loaded, const EngineFlags& f) {
  engine::EngineConfig config;
  config.num_threads = f.threads;
  config.max_num_seqs = f.max_num_seqs;
  config.batch_invariant = f.batch_invariant;
  config.enable_prefix_caching = f.prefix_caching;
  config.int8_activations = f.matmul_precision == "int8";
  config.overlap_scheduling = f.overlap == "on";
  if ((f.kv_store_ram_gb > 0 || f.kv_store_capacity_gb > 0) && f.kv_store.empty())
    return invalid_argument("{} needs at least one --kv-store directory",
                            f.kv_store_ram_gb > 0 ? "--kv-store-ram-gb" : "--kv-store-capacity-gb");
  for (const auto& dir : f.kv_store) {
    // A target that cannot be created is one unusable target: the store serves without it
    // while its erasure coding allows, and refuses to open beyond that.
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    config.kv_store_dirs.push_back(dir);
  }
  config.kv_store_host_bytes = static_cast<size_t>(f.kv_store_ram_gb * double(size_t{1} << 30));
  config.kv_store_target_capacity_bytes =
      static_cast<uint64_t>(f.kv_store_capacity_gb * double(uint64_t{1} << 30));
  if (!f.kv_store_ttl.empty()) {
    if (f.kv_store.empty()) return invalid_argument("--kv-store-ttl needs at least one --kv-store directory");
    DI_RETURN_IF_ERROR(kvstore::parse_ttl_spec(f.kv_store_ttl, config.kv_store_ttl_seconds));
  }
  config.default_traffic_class =
      kvstore::traffic_class_from_name(f.traffic_class).value_or(kvstore::TrafficClass::kChat);
  if (!config.kv_store_dirs.empty()) {
    // The weights' content, not their name or file times (issue #30); hashed once per file
    // version, remembered under $DEEPINFER_HOME.
    kvstore::ContentDigestOptions digest_opts;
    digest_opts.cache_file = model::deepinfer_home() + "/kvstore/weights-digests";
    DI_ASSIGN_OR_RETURN(std::string digest, kvstore::content_digest(loaded.path, digest_opts));
    config.kv_store_namespace = loaded.model->config().name + "|weights=" + digest;
  }
  return engine::Engine::create(std::move(loaded.model), loaded.tokenizer, config);
}

Result<std::vector<int32_t>> encode_prompt(const recipe::Tokenizer& tok, std::string_view architecture,
                                           const std::string& text, bool chat) {
  if (chat) {
    std::vector<recipe::ChatMessage> messages = {{"user", text}};
    return recipe::encode_chat_for_model(tok, architecture, messages, recipe::ChatOptions{});
  }
  std::vector<int32_t> ids;
  if (tok.add_bos()) ids.push_back(tok.bos_id());
  std::vector<int32_t> body = tok.encode(text, /*allow_special=*/false);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

}  // namespace deepinfer::tools
