// The table of sampling fields: the engine's own defaults are the table's API defaults, each
// interface's defaults are the documented ones (docs/sampling.md), and the checks name the field
// and its range.
#include "deepinfer/engine/sampling_fields.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

namespace deepinfer::engine {
namespace {

TEST(SamplingFields, EngineDefaultsAreTheApiDefaults) {
  const GenerationRequest plain;  // SamplingParams' member initializers
  for (const SamplingField& f : sampling_fields()) {
    if (f.name == "max_tokens")
      continue;  // a per-interface setting (the engine has no API of its own)
    const double want = f.defaults[int(Defaults::kApi)];
    if (f.type == FieldType::kSeed) {
      EXPECT_TRUE(std::isnan(f.get(plain))) << "unseeded by default";
    } else {
      EXPECT_EQ(f.get(plain), double(float(want))) << f.name;
    }
  }
}

TEST(SamplingFields, EachInterfaceHasItsDocumentedDefaults) {
  const GenerationRequest api = default_request(Defaults::kApi);
  EXPECT_EQ(api.sampling.temperature, 1.0f);  // OpenAI, Anthropic, vLLM
  EXPECT_EQ(api.max_tokens, 16);              // vLLM's SamplingParams
  const GenerationRequest gen = default_request(Defaults::kGenerate);
  EXPECT_EQ(gen.sampling.temperature, 0.0f);  // `generate` is greedy
  EXPECT_EQ(gen.sampling.top_p, 1.0f);
  EXPECT_EQ(gen.max_tokens, 256);
  const GenerationRequest chat = default_request(Defaults::kChat);
  EXPECT_EQ(chat.sampling.temperature, 0.7f);
  EXPECT_EQ(chat.sampling.top_p, 0.9f);
  EXPECT_EQ(chat.max_tokens, 512);
  for (const GenerationRequest* r : {&api, &gen, &chat}) {
    EXPECT_FALSE(r->sampling.has_seed);
    EXPECT_EQ(r->sampling.logprobs, -1);
    EXPECT_FALSE(r->ignore_eos);
  }
}

TEST(SamplingFields, NamesAreUniqueAndFlagsAreKebabCase) {
  std::set<std::string> names;
  for (const SamplingField& f : sampling_fields()) {
    EXPECT_TRUE(names.insert(std::string(f.name)).second) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_LE(f.http_max, f.max) << f.name;
    EXPECT_EQ(find_sampling_field(f.name), &f);
  }
  EXPECT_EQ(cli_flag(*find_sampling_field("repetition_penalty")), "--repetition-penalty");
  EXPECT_EQ(find_sampling_field("no_such_field"), nullptr);
}

TEST(SamplingFields, ChecksNameTheFieldAndRange) {
  const SamplingField& top_p = *find_sampling_field("top_p");
  EXPECT_TRUE(check_sampling_value(top_p, 1.0).is_ok());
  const Status zero = check_sampling_value(top_p, 0.0);
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(zero.message(), "top_p must be in (0, 1], got 0");
  const SamplingField& logprobs = *find_sampling_field("logprobs");
  EXPECT_TRUE(check_sampling_value(logprobs, -1).is_ok());  // off
  EXPECT_TRUE(check_sampling_value(logprobs, 20).is_ok());
  EXPECT_FALSE(check_sampling_value(logprobs, 21).is_ok());
  EXPECT_FALSE(check_sampling_value(logprobs, -2).is_ok());
  const SamplingField& temperature = *find_sampling_field("temperature");
  EXPECT_FALSE(check_sampling_value(temperature, std::nan("")).is_ok());
  EXPECT_FALSE(check_sampling_value(temperature, -0.5).is_ok());
}

TEST(SamplingFields, TopKMinusOneMeansOffAndOtherNegativesAreRefused) {
  const SamplingField& top_k = *find_sampling_field("top_k");
  GenerationRequest r;
  top_k.set(r, 0, -1);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_TRUE(validate_sampling_params(r.sampling, 10).is_ok());
  top_k.set(r, 0, -5);
  EXPECT_NE(validate_sampling_params(r.sampling, 10).message().find("top_k"), std::string::npos);
}

TEST(SamplingFields, SeedSetsHasSeedAndKeepsAll64Bits) {
  const SamplingField& seed = *find_sampling_field("seed");
  GenerationRequest r;
  seed.set(r, 0, -1);
  EXPECT_TRUE(r.sampling.has_seed);
  EXPECT_EQ(r.sampling.seed, ~uint64_t{0});
}

}  // namespace
}  // namespace deepinfer::engine
