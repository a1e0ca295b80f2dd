// The default model (GGUF weights + its tokenizer) opened once per test fixture, and engines
// over fresh copies of its weights. Tests call DI_REQUIRE_DEFAULT_MODEL() before open().
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "deepinfer/engine/engine.h"
#include "deepinfer/model/format/gguf.h"
#include "deepinfer/recipe/tokenizer.h"
#include "test_model.h"

namespace deepinfer::testing {

struct DefaultModel {
  std::shared_ptr<format::GgufFile> gguf;
  std::shared_ptr<const recipe::Tokenizer> tokenizer;

  // Opens the default model file and its tokenizer; records a test failure when either fails.
  static DefaultModel open() {
    DefaultModel d;
    auto g = format::GgufFile::open(default_model_path());
    EXPECT_TRUE(g.is_ok()) << (g.is_ok() ? "" : g.status().message());
    if (!g.is_ok()) return d;
    d.gguf = *g;
    auto t = recipe::Tokenizer::from_gguf(*d.gguf);
    EXPECT_TRUE(t.is_ok()) << (t.is_ok() ? "" : t.status().message());
    if (t.is_ok()) d.tokenizer = std::shared_ptr<const recipe::Tokenizer>(std::move(t).value());
    return d;
  }

  // A new engine (its own weights, KV cache and threads) with `config`; null after recording a
  // test failure when it cannot be built.
  std::unique_ptr<engine::Engine> engine(const engine::EngineConfig& config) const {
    model::WeightSource src;
    src.gguf = gguf;
    src.description = default_model_path();
    auto m = model::load_model(src);
    EXPECT_TRUE(m.is_ok()) << (m.is_ok() ? "" : m.status().message());
    if (!m.is_ok()) return nullptr;
    auto e = engine::Engine::create(std::move(*m), tokenizer, config);
    EXPECT_TRUE(e.is_ok()) << (e.is_ok() ? "" : e.status().message());
    if (!e.is_ok()) return nullptr;
    return std::move(e).value();
  }
};

}  // namespace deepinfer::testing
