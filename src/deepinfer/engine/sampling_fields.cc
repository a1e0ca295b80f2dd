#include "deepinfer/engine/sampling_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace deepinfer::engine {
namespace {

constexpr unsigned kAll = kHttp | kCli | kJsonl | kPython;
constexpr double kNoOff = 0;
constexpr double kInt64Max = double(std::numeric_limits<int64_t>::max());
constexpr double kInt64Min = double(std::numeric_limits<int64_t>::min());

// Out-of-range values saturate, so that the range check still sees them out of range.
int to_int(int64_t v) {
  return int(std::clamp<int64_t>(v, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
}

// Setters and getters per member (captureless lambdas convert to the table's pointers).
#define DI_REAL(member)                                                           \
  [](GenerationRequest& r, double v, int64_t) { r.member = float(v); },         \
      [](const GenerationRequest& r) { return double(r.member); }
#define DI_INT(member)                                                            \
  [](GenerationRequest& r, double, int64_t v) { r.member = to_int(v); },        \
      [](const GenerationRequest& r) { return double(r.member); }

// Defaults: {HTTP APIs and Python, `generate`, `chat`}; why: docs/sampling.md.
const SamplingField kFields[] = {
    {"temperature", FieldType::kReal, kAll, {1.0, 0.0, 0.7}, 0, 100, false, 2, false, kNoOff,
     "Sampling temperature; 0 = greedy (always the most likely token)", DI_REAL(sampling.temperature)},
    {"top_p", FieldType::kReal, kAll, {1.0, 1.0, 0.9}, 0, 1, true, 1, false, kNoOff,
     "Nucleus sampling: keep the most likely tokens up to this probability mass (1 = off)",
     DI_REAL(sampling.top_p)},
    {"top_k", FieldType::kInt, kAll, {0, 0, 0}, -1, 1 << 30, false, 1 << 30, false, kNoOff,
     "Keep the K most likely tokens (0 or -1 = off)",
     [](GenerationRequest& r, double, int64_t v) { r.sampling.top_k = v == -1 ? 0 : to_int(v); },
     [](const GenerationRequest& r) { return double(r.sampling.top_k); }},
    {"min_p", FieldType::kReal, kAll, {0, 0, 0}, 0, 1, false, 1, false, kNoOff,
     "Drop tokens below this fraction of the top token's probability (0 = off)", DI_REAL(sampling.min_p)},
    {"repetition_penalty", FieldType::kReal, kAll, {1, 1, 1}, 0.01, 100, false, 10, false, kNoOff,
     "Divide the logits of tokens already in the prompt or output (> 1 discourages repeats; "
     "1 = off)",
     DI_REAL(sampling.repetition_penalty)},
    {"frequency_penalty", FieldType::kReal, kAll, {0, 0, 0}, -2, 2, false, 2, false, kNoOff,
     "OpenAI frequency penalty: minus count * value for tokens in the output",
     DI_REAL(sampling.frequency_penalty)},
    {"presence_penalty", FieldType::kReal, kAll, {0, 0, 0}, -2, 2, false, 2, false, kNoOff,
     "OpenAI presence penalty: minus value for tokens present in the output",
     DI_REAL(sampling.presence_penalty)},
    {"seed", FieldType::kSeed, kAll, {0, 0, 0}, kInt64Min, kInt64Max, false, kInt64Max, false, kNoOff,
     "Random seed: same seed, settings and prompt, same output (default: a per-request stream)",
     [](GenerationRequest& r, double, int64_t v) {
       r.sampling.seed = uint64_t(v);
       r.sampling.has_seed = true;
     },
     [](const GenerationRequest& r) {
       return r.sampling.has_seed ? double(int64_t(r.sampling.seed)) : std::nan("");
     }},
    {"max_tokens", FieldType::kInt, kCli | kJsonl | kPython, {16, 256, 512}, 0, 1 << 20, false, 1 << 20,
     false, kNoOff, "Most tokens to generate (the model's context ends it earlier)", DI_INT(max_tokens)},
    {"logprobs", FieldType::kInt, kCli | kJsonl | kPython, {-1, -1, -1}, 0, 20, false, 20, true, -1,
     "Report the top-N log-probabilities of each generated token (default: off)", DI_INT(sampling.logprobs)},
    {"ignore_eos", FieldType::kFlag, kAll, {0, 0, 0}, 0, 1, false, 1, false, kNoOff,
     "Keep generating after the end-of-sequence token",
     [](GenerationRequest& r, double, int64_t v) { r.ignore_eos = v != 0; },
     [](const GenerationRequest& r) { return r.ignore_eos ? 1.0 : 0.0; }},
    // Not a CLI flag: --speculative is the engine's drafter, and the output is the same either way.
    {"speculative", FieldType::kFlag, kHttp | kJsonl | kPython, {1, 1, 1}, 0, 1, false, 1, false, kNoOff,
     "Use the engine's speculative decoding for this request (false opts out; same output)",
     [](GenerationRequest& r, double, int64_t v) { r.speculative = v != 0; },
     [](const GenerationRequest& r) { return r.speculative ? 1.0 : 0.0; }},
};

#undef DI_REAL
#undef DI_INT

}  // namespace

std::span<const SamplingField> sampling_fields() { return kFields; }

const SamplingField* find_sampling_field(std::string_view name) {
  for (const SamplingField& f : kFields)
    if (f.name == name) return &f;
  return nullptr;
}

std::string cli_flag(const SamplingField& f) {
  std::string flag = "--" + std::string(f.name);
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

GenerationRequest default_request(Defaults which) {
  GenerationRequest r;
  for (const SamplingField& f : kFields) {
    const double v = f.defaults[int(which)];
    if (f.type == FieldType::kSeed) continue;  // unseeded by default
    f.set(r, v, int64_t(v));
  }
  return r;
}

Status check_sampling_value(const SamplingField& f, double v) {
  if (f.has_off && v == f.off) return Status::ok();
  const bool above_min = f.min_exclusive ? v > f.min : v >= f.min;
  if (above_min && v <= f.max && std::isfinite(v)) return Status::ok();
  std::string range = fmt::format("{}{}, {}]", f.min_exclusive ? "(" : "[", f.min, f.max);
  if (f.has_off) range += fmt::format(" (or {} for off)", f.off);
  return invalid_argument("{} must be in {}, got {}", f.name, range, v);
}

Status validate_sampling_params(const SamplingParams& p, int32_t vocab_size) {
  GenerationRequest probe;  // the table reads members through a request
  probe.sampling = p;
  for (const SamplingField& f : kFields) {
    if (f.type != FieldType::kReal && f.type != FieldType::kInt) continue;
    if (f.name == "max_tokens") continue;  // a request field, checked by the engine itself
    DI_RETURN_IF_ERROR(check_sampling_value(f, f.get(probe)));
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab_size)
      return invalid_argument("logit_bias token {} is outside the vocabulary of {}", id, vocab_size);
    if (!(bias >= -100.0f && bias <= 100.0f))
      return invalid_argument("logit_bias for token {} must be in [-100, 100], got {}", id, bias);
  }
  return Status::ok();
}

}  // namespace deepinfer::engine
