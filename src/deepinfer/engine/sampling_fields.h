// The one definition of the per-request sampling settings: for each field its name, type,
// defaults, range, help text, the GenerationRequest member it sets and which interfaces expose
// it. The HTTP reader (serve/request_fields.cc), the CLI flags (tools/cli_common.cc), the
// `generate --input` JSONL lines (tools/generate_input.cc), the Python SamplingParams
// (python/bindings.cc) and the engine's admission check all walk this table; docs/sampling.md
// explains the defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/request.h"

namespace deepinfer::engine {

enum class FieldType {
  kReal,  // a float member
  kInt,   // an int member (JSON integers; the CLI takes an integer)
  kSeed,  // any 64-bit integer; setting it makes the request seeded
  kFlag,  // a bool (JSON true/false, a CLI flag without a value)
};

// Interfaces a field is read from. Every field is also checked at engine admission.
enum Surface : unsigned {
  kHttp = 1u << 0,    // every /v1 API body, under `name` (max_tokens and logprobs are per API)
  kCli = 1u << 1,     // `generate` and `chat`: --name with '-' for '_'
  kJsonl = 1u << 2,   // `generate --input` lines, under `name`
  kPython = 1u << 3,  // deepinfer.SamplingParams(name=...)
};

// Whose defaults: the HTTP APIs and Python (`kApi`, also the engine's own), `deepinfer
// generate` (and the JSONL lines it reads), `deepinfer chat`. Why each: docs/sampling.md.
enum class Defaults { kApi = 0, kGenerate = 1, kChat = 2 };
inline constexpr int kNumDefaults = 3;

struct SamplingField {
  std::string_view name;  // JSON and Python name; the CLI flag is "--" + name, '_' -> '-'
  FieldType type;
  unsigned surfaces;      // Surface bits
  double defaults[kNumDefaults];  // by Defaults; kSeed: unused (unseeded by default)
  // Accepted values (CLI, JSONL, Python, engine). `min_exclusive`: min itself is refused.
  double min, max;
  bool min_exclusive;
  // The HTTP APIs' bound where narrower (OpenAI's documented ranges); else max.
  double http_max;
  // A value meaning "off", accepted outside [min, max] (logprobs: -1); read only when has_off.
  bool has_off;
  double off;
  std::string_view help;
  // Writes a value already checked against the range (kReal: `real`; kInt, kSeed: `integer`;
  // kFlag: integer != 0).
  void (*set)(GenerationRequest& r, double real, int64_t integer);
  double (*get)(const GenerationRequest& r);  // kSeed: NaN when unseeded
};

// All fields, in documentation order.
std::span<const SamplingField> sampling_fields();
const SamplingField* find_sampling_field(std::string_view name);

// The CLI flag of a field ("--top-p").
std::string cli_flag(const SamplingField& f);

// A request holding every field's default for `which` (prompt and everything else empty).
GenerationRequest default_request(Defaults which);

// Whether `v` is an accepted value of `f` (its range, or its off value); the message names the
// field and the range, e.g. "top_p must be in (0, 1], got 0".
Status check_sampling_value(const SamplingField& f, double v);

}  // namespace deepinfer::engine
