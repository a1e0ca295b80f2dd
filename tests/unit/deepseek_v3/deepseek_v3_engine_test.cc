// DeepSeek-V3 through the real engine (scheduler, block manager, chunked prefill, mixed
// prefill/decode batches, latent-only paged KV cache with v_head_dim = 0): greedy generations
// of three concurrent requests equal the transformers reference continuations.
#include <map>

#include "ds_fixture.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer {
namespace {

// The fixtures have no tokenizer; a byte vocabulary of the model's 256 ids is enough for the
// engine (it only detokenizes the output).
std::shared_ptr<const recipe::Tokenizer> byte_tokenizer() {
  recipe::TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  spec.bos_id = 0;
  spec.eos_id = 1;
  auto t = recipe::Tokenizer::build(std::move(spec));
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::shared_ptr<const recipe::Tokenizer>(std::move(t).value());
}

TEST(DeepseekV3Engine, GreedyGenerationsMatchReference) {
  const std::string name = "moe_yarn";
  auto loaded = dstest::open_dir(dstest::fixture_dir(name));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  engine::EngineConfig cfg;
  cfg.num_threads = 1;
  cfg.block_size = 4;
  cfg.max_num_batched_tokens = 7;  // prompts of 5, 12 and 20 tokens prefill in chunks
  cfg.kv_cache_bytes = size_t{1} << 20;
  auto e = engine::Engine::create(std::move(*loaded), byte_tokenizer(), cfg);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const auto fx = dstest::expected(name);
  std::map<int64_t, int> case_of;
  std::map<int64_t, std::vector<int32_t>> generated;
  for (int c = 0; c < static_cast<int>(fx["cases"].size()); ++c) {
    engine::GenerationRequest r;
    r.prompt_ids = fx["cases"][c]["ids"].get<std::vector<int32_t>>();
    r.sampling.temperature = 0.0f;
    r.max_tokens = static_cast<int>(fx["cases"][c]["greedy"].size());
    r.ignore_eos = true;
    auto id = (*e)->add_request(r);
    ASSERT_TRUE(id.is_ok()) << id.status().message();
    case_of[*id] = c;
  }
  for (int guard = 0; (*e)->has_unfinished() && guard < 1000; ++guard) {
    for (const auto& out : (*e)->step()) {
      ASSERT_TRUE(out.error.empty()) << out.error;
      auto& g = generated[out.request_id];
      g.insert(g.end(), out.new_token_ids.begin(), out.new_token_ids.end());
    }
  }
  ASSERT_EQ(generated.size(), case_of.size());
  // Expert routing statistics reach the engine: every forwarded token went to top-k experts in
  // each MoE layer (at least once: preemption may recompute), none in the dense layer.
  const auto counts = (*e)->expert_token_counts();
  const auto& mc = (*e)->model_config();
  ASSERT_GE(counts.size(), size_t(mc.num_layers));
  uint64_t forwarded = 0;
  for (const auto& c : fx["cases"]) forwarded += c["ids"].size() + c["greedy"].size() - 1;
  for (int l = 0; l < mc.num_layers; ++l) {
    uint64_t sum = 0;
    for (uint64_t x : counts[size_t(l)]) sum += x;
    if (l < mc.first_k_dense_replace) {
      EXPECT_EQ(sum, 0u) << "dense layer " << l;
    } else {
      EXPECT_GE(sum, forwarded * uint64_t(mc.num_experts_per_tok)) << "layer " << l;
    }
  }
  int compared = 0;
  for (const auto& [id, tokens] : generated) {
    const auto& c = fx["cases"][case_of[id]];
    const auto greedy = c["greedy"].get<std::vector<int32_t>>();
    const auto margin = c["greedy_margin"].get<std::vector<float>>();
    ASSERT_EQ(tokens.size(), greedy.size());
    for (size_t i = 0; i < greedy.size() && margin[i] >= 1e-3f; ++i, ++compared)
      EXPECT_EQ(tokens[i], greedy[i]) << "case " << case_of[id] << " token " << i;
  }
  EXPECT_GE(compared, 12);
}

}  // namespace
}  // namespace deepinfer
