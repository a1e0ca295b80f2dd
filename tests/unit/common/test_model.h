// Test helpers: where the default model and the committed fixtures are. Tests that need the
// model skip when it is absent, except under CI=true where its absence is a failure.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/model.h"

namespace deepinfer::testing {

inline std::string deepinfer_home_for_tests() {
  if (const char* h = std::getenv("DEEPINFER_HOME")) return h;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/deepinfer";
}

inline std::string default_model_path() {
  return deepinfer_home_for_tests() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline std::string source_dir() {
  if (const char* s = std::getenv("DEEPINFER_SOURCE_DIR")) return s;
  return DEEPINFER_SOURCE_DIR;
}

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}


// Logits at every position of one sequence, computed in one forward batch (one sequence,
// blocks 0..n-1 in order; hybrid caches: recent slab i with block i).
// Logits at every position of `ids` in one forward; with `embed_rows`, input embeddings
// `embeds` [rows * hidden] replace those rows' token embeddings (multimodal models).
// `kv_dtype` is the K/V pools' element type (--kv-cache-dtype).
inline std::vector<float> all_position_logits(model::Model& m, const std::vector<int32_t>& ids,
                                              ThreadPool& pool,
                                              const std::vector<int32_t>& embed_rows = {},
                                              const std::vector<float>& embeds = {},
                                              DType kv_dtype = DType::kF32,
                                              bool batch_invariant = false) {
  const int block_size = 16;
  const int n = static_cast<int>(ids.size());
  const int blocks = (n + block_size - 1) / block_size;
  model::KvCacheSpec spec = m.kv_cache_spec();
  spec.dtype = kv_dtype;
  model::KvCache cache = model::KvCache::allocate(spec, blocks, block_size, blocks);
  ForwardBatch b;
  b.token_ids = ids;
  for (int i = 0; i < n; ++i) {
    b.positions.push_back(i);
    b.slot_mapping.push_back(i);
    b.logits_rows.push_back(i);
  }
  b.seq_token_start = {0, n};
  b.seq_context_len = {n};
  b.block_table_indptr = {0, blocks};
  for (int i = 0; i < blocks; ++i) b.block_table.push_back(i);
  if (m.kv_cache_spec().has_recent()) b.recent_slab_table = b.block_table;
  b.embed_rows = embed_rows;
  b.embeds = embeds;
  std::vector<float> logits(size_t(n) * m.config().vocab_size);
  model::ForwardContext ctx{&pool, batch_invariant};
  Status st = m.forward(b, cache, ctx, logits.data());
  EXPECT_TRUE(st.is_ok()) << st.message();
  return logits;
}

}  // namespace deepinfer::testing

// Skips the test (or fails it under CI=true) when the default model is not downloaded.
#define DI_REQUIRE_DEFAULT_MODEL()                                                          \
  do {                                                                                      \
    if (!std::filesystem::exists(::deepinfer::testing::default_model_path())) {             \
      if (::deepinfer::testing::in_ci()) FAIL() << "missing " << ::deepinfer::testing::default_model_path(); \
      GTEST_SKIP() << "default model not downloaded: run `deepinfer pull smollm2-135m-instruct`"; \
    }                                                                                       \
  } while (0)
