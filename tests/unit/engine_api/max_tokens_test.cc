// max_tokens is limited in one place, the engine's admission: to what the model's context
// (tiny_llama: 2048 positions) leaves after the prompt. A request for more, or for
// kUntilContextEnd (HTTP Chat and Responses without a max_tokens), stops at the context's end
// with finish reason length; a smaller one is kept.
#include <gtest/gtest.h>

#include "../common/test_model.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer {
namespace {

std::unique_ptr<engine::Engine> tiny_llama_engine() {
  const std::string dir = testing::source_dir() + "/tests/reference/fixtures/tiny_llama";
  auto st = format::SafetensorsModel::open(dir);
  EXPECT_TRUE(st.is_ok()) << st.status().message();
  if (!st.is_ok()) return nullptr;
  model::WeightSource src;
  src.safetensors = *st;
  src.description = dir;
  auto model = model::load_model(src);
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  if (!model.is_ok()) return nullptr;
  // The fixture has no tokenizer; bytes are enough (the engine only detokenizes the output).
  recipe::TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  spec.bos_id = 0;
  spec.eos_id = 1;
  auto tok = recipe::Tokenizer::build(std::move(spec));
  EXPECT_TRUE(tok.is_ok());
  engine::EngineConfig cfg;
  cfg.num_threads = 1;
  cfg.max_num_batched_tokens = 2048;
  cfg.kv_cache_bytes = size_t{64} << 20;
  auto e = engine::Engine::create(std::move(*model),
                                  std::shared_ptr<const recipe::Tokenizer>(std::move(*tok)), cfg);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

// Generates greedily to the end; returns the final output.
engine::RequestOutput run(engine::Engine& e, int prompt_len, int max_tokens) {
  engine::GenerationRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(2 + i % 200);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  auto id = e.add_request(r);
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  engine::RequestOutput last;
  int tokens = 0;
  while (e.has_unfinished())
    for (auto& o : e.step()) {
      tokens += int(o.new_token_ids.size());
      if (o.finished) last = o;
    }
  EXPECT_EQ(tokens, last.completion_tokens);
  return last;
}

TEST(MaxTokens, ClampedToTheContextLeftAfterThePrompt) {
  auto e = tiny_llama_engine();
  ASSERT_TRUE(e);
  ASSERT_EQ(e->model_config().max_position, 2048);
  for (int asked : {1 << 20, engine::GenerationRequest::kUntilContextEnd}) {
    const engine::RequestOutput out = run(*e, 2040, asked);
    EXPECT_EQ(out.completion_tokens, 8) << asked;
    EXPECT_EQ(out.finish_reason, engine::FinishReason::kLength);
  }
  EXPECT_EQ(run(*e, 2040, 3).completion_tokens, 3);  // within the context: kept
}

TEST(MaxTokens, APromptThatFillsTheContextIsRefused) {
  auto e = tiny_llama_engine();
  ASSERT_TRUE(e);
  engine::GenerationRequest r;
  r.prompt_ids.assign(2048, 5);
  EXPECT_EQ(e->add_request(r).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer
