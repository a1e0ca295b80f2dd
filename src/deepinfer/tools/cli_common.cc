#include "deepinfer/tools/cli_common.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "deepinfer/engine/speculative/draft_model_setup.h"
#include "deepinfer/kernels/device.h"
#include "deepinfer/kvstore/content_digest.h"
#include "deepinfer/kvstore/ttl_spec.h"
#include "deepinfer/model/catalog.h"
#include "deepinfer/recipe/chat.h"

namespace deepinfer::tools {

int report_error(const Status& status) {
  std::fprintf(stderr, "deepinfer: %s\n", status.message().c_str());
  return status.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntimeError;
}

namespace {

// Refuses what the table refuses, with its message ("top_p must be in (0, 1], got 0").
CLI::Validator table_check(const engine::SamplingField& f) {
  return CLI::Validator(
      [&f](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') return "not a number: " + text;
        const Status st = engine::check_sampling_value(f, v);
        return st.is_ok() ? std::string() : st.message();
      },
      fmt::format("in {}{} - {}]", f.min_exclusive ? "(" : "[", f.min, f.max));
}

}  // namespace

void add_sampling_flags(CLI::App& app, SamplingFlags& flags, engine::Defaults defaults) {
  using engine::FieldType;
  flags.request = engine::default_request(defaults);
  for (const engine::SamplingField& f : engine::sampling_fields()) {
    if (!(f.surfaces & engine::kCli)) continue;
    const std::string flag = cli_flag(f);
    const std::string help(f.help);
    const double def = f.defaults[int(defaults)];
    engine::GenerationRequest& r = flags.request;
    CLI::Option* opt = nullptr;
    switch (f.type) {
      case FieldType::kReal:
        opt = app.add_option_function<double>(flag, [&f, &r](const double& v) { f.set(r, v, 0); }, help);
        opt->default_str(fmt::format("{}", def));
        break;
      case FieldType::kInt:
        opt = app.add_option_function<int64_t>(flag, [&f, &r](const int64_t& v) { f.set(r, 0, v); }, help);
        if (!(f.has_off && def == f.off)) opt->default_str(fmt::format("{}", def));
        break;
      case FieldType::kSeed:
        opt = app.add_option_function<int64_t>(flag, [&f, &r](const int64_t& v) { f.set(r, 0, v); }, help);
        break;
      case FieldType::kFlag:
        app.add_flag_function(flag, [&f, &r](int64_t count) { f.set(r, 0, count > 0); }, help);
        break;
    }
    if (opt && f.type != FieldType::kSeed) opt->check(table_check(f));
  }
  app.add_option("--stop", flags.stop, "Stop string (repeatable)");
}

engine::GenerationRequest make_request(const SamplingFlags& flags) {
  engine::GenerationRequest r = flags.request;
  r.stop = flags.stop;
  return r;
}

void add_engine_flags(CLI::App& app, EngineFlags& f) {
  app.add_option("--model,-m", f.model,
                 "A .gguf file, a Hugging Face model directory, or a catalogue name "
                 "(default: smollm2-135m-instruct)");
  app.add_option("--threads,-t", f.threads, "Compute threads (default: one per core)")->check(CLI::Range(0, 1024));
  app.add_option("--max-num-seqs", f.max_num_seqs, "Most sequences decoded together")->check(CLI::Range(1, 4096));
  app.add_option("--kv-cache-gb", f.kv_cache_gb, "KV cache pool in GiB (default 1)")
      ->check(CLI::Range(1.0 / 64, 65536.0));
  app.add_flag("--batch-invariant", f.batch_invariant,
               "Bitwise-identical results whatever else is in the batch");
  app.add_option("--device", f.device,
                 "Compute device: cpu, cuda, or auto (default: cuda once the engine can run on a GPU "
                 "and one is visible, else cpu). The CUDA kernels exist, the engine's GPU forward pass "
                 "does not yet, so cuda is refused for now (docs/cuda.md)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  // Resolved as soon as the flags are parsed, before any model is loaded or fetched; the probe
  // (which starts the CUDA driver) only runs when the answer depends on it.
  app.parse_complete_callback([&f] {
    const bool need_probe = f.device == "cuda" || (f.device == "auto" && kernels::kGpuEngineBuilt);
    const kernels::GpuProbe probe = need_probe ? kernels::probe_gpu() : kernels::GpuProbe{};
    const auto device = kernels::resolve_device(f.device, probe, kernels::kGpuEngineBuilt);
    if (!device.is_ok()) {
      std::fprintf(stderr, "deepinfer: %s\n", device.status().message().c_str());
      throw CLI::RuntimeError(kExitUsage);  // CLI11 prints nothing more; main() exits with 2
    }
  });
  app.add_option("--matmul-precision", f.matmul_precision,
                 "high: float32 activations, matches the float reference (default); int8: 8-bit "
                 "activations like llama.cpp, faster decode, logits differ by up to ~1")
      ->check(CLI::IsMember({"high", "int8"}));
  app.add_option("--kv-cache-dtype", f.kv_cache_dtype,
                 "KV cache element type: auto (= f32, default), f32, bf16 or f16. 16-bit halves the "
                 "KV memory and the bytes attention reads (twice the tokens fit in --kv-cache-gb); "
                 "logits then move by up to ~0.03 (f16) or ~0.4 (bf16) on the default model (docs/benchmarks.md). "
                 "DeepSeek-V4 models: f32 only")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}));
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
  app.add_option("--swa-restore", f.swa_restore,
                 "DeepSeek-V4 models: how a cached prefix whose sliding-window rows are gone is "
                 "restored, for requests that do not say: bounded (replay its last window of "
                 "tokens, window cut there; constant cost, approximate; default) or exact (reuse "
                 "only prefixes whose rows are held: same output as no cache)")
      ->check(CLI::IsMember({"bounded", "exact"}));
  app.add_option("--kv-store-ttl", f.kv_store_ttl,
                 "KV store lifetime per traffic class, e.g. agent=3d,chat=7d (s, m, h, d); a block "
                 "used by both classes keeps the longer one (default: agent=3d,chat=7d)");
  app.add_option("--speculative", f.speculative,
                 "Speculative decoding with this drafter: ngram (prompt lookup, no weights), draft (a "
                 "smaller model sharing the tokenizer, --draft-model) or mtp (the model's own MTP layer: "
                 "DeepSeek-V3 and V4 checkpoints that have one). Output is the same as without it "
                 "(docs/speculative.md); in bench --mode spec: the drafter of every task");
  app.add_option("--draft-model", f.draft_model,
                 "--speculative draft: the draft model (a .gguf file, a Hugging Face directory or a catalogue "
                 "name) with the target's tokenizer; it drafts greedily with its own KV cache");
  app.add_option("--draft-kv-cache-gb", f.draft_kv_cache_gb,
                 "--speculative draft: the draft model's KV cache in GiB (default: room for as many tokens "
                 "as --kv-cache-gb holds for the target)")
      ->check(CLI::Range(0.0, 65536.0));
  app.add_option("--num-draft-tokens", f.num_draft_tokens,
                 "Speculative decoding: most draft tokens verified per sequence and step (1-16, default 4)");
  app.add_option("--spec-policy", f.spec_policy,
                 "Speculative decoding: fixed (verify every draft) or dspark (verify the drafts worth "
                 "it, from online acceptance estimates and the step's load; default)");
}

Result<std::unique_ptr<engine::Engine>> make_engine(LoadedModel& loaded, const EngineFlags& f) {
  engine::EngineConfig config;
  config.num_threads = f.threads;
  config.max_num_seqs = f.max_num_seqs;
  config.kv_cache_bytes = static_cast<size_t>(f.kv_cache_gb * double(size_t{1} << 30));
  config.batch_invariant = f.batch_invariant;
  config.enable_prefix_caching = f.enable_prefix_caching;
  config.int8_activations = f.matmul_precision == "int8";
  config.kv_cache_dtype = f.kv_cache_dtype;
  config.overlap_scheduling = f.overlap == "on";
  config.speculative.method = f.speculative;
  config.speculative.num_draft_tokens = f.num_draft_tokens;
  config.speculative.draft_model = f.draft_model;
  config.speculative.trace_path = f.spec_trace;
  config.speculative.draft_kv_cache_bytes = static_cast<size_t>(f.draft_kv_cache_gb * double(size_t{1} << 30));
  DI_ASSIGN_OR_RETURN(config.speculative.policy, engine::speculative::parse_spec_policy(f.spec_policy));
  DI_RETURN_IF_ERROR(engine::speculative::validate(config.speculative));
  if (config.speculative.method == "draft") {
    DI_ASSIGN_OR_RETURN(config.speculative.draft_weights,
                        engine::speculative::load_draft_model(f.draft_model, *loaded.tokenizer, loaded.path));
  }
  config.kv_store_ram_only = f.kv_store_ram_only;
  if (((f.kv_store_ram_gb > 0 && !f.kv_store_ram_only) || f.kv_store_capacity_gb > 0) && f.kv_store.empty())
    return invalid_argument("{} needs at least one --kv-store directory",
                            f.kv_store_ram_gb > 0 ? "--kv-store-ram-gb" : "--kv-store-capacity-gb");
  for (const auto& dir : f.kv_store) {
    // A target that cannot be created is one unusable target: the store serves without it
    // while its erasure coding allows, and refuses to open beyond that.
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    config.kv_store_dirs.push_back(dir);
  }
  config.kv_store_host_tier_bytes = static_cast<size_t>(f.kv_store_ram_gb * double(size_t{1} << 30));
  config.kv_store_target_capacity_bytes =
      static_cast<uint64_t>(f.kv_store_capacity_gb * double(uint64_t{1} << 30));
  if (!f.kv_store_ttl.empty()) {
    if (f.kv_store.empty()) return invalid_argument("--kv-store-ttl needs at least one --kv-store directory");
    DI_RETURN_IF_ERROR(kvstore::parse_ttl_spec(f.kv_store_ttl, config.kv_store_ttl_seconds));
  }
  config.default_traffic_class =
      kvstore::traffic_class_from_name(f.traffic_class).value_or(kvstore::TrafficClass::kChat);
  config.default_swa_restore = engine::swa_restore_from_name(f.swa_restore)
                                   .value_or(engine::SwaRestore::kBounded);
  if (!config.kv_store_dirs.empty() || config.kv_store_ram_only) {
    // The weights' content, not their name or file times (issue #30); hashed once per file
    // version, remembered under $DEEPINFER_HOME.
    kvstore::ContentDigestOptions digest_opts;
    digest_opts.cache_file = model::deepinfer_home() + "/kvstore/weights-digests";
    DI_ASSIGN_OR_RETURN(std::string digest, kvstore::content_digest(loaded.path, digest_opts));
    config.kv_store_namespace = loaded.model->config().name + "|weights=" + digest;
  }
  return engine::Engine::create(std::move(loaded.model), loaded.tokenizer, config);
}

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
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
