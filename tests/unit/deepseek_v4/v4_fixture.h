// Helpers for the DeepSeek-V4 tests: fixture directories (tests/reference/fixtures/deepseek_v4,
// made by tests/reference/make_tiny_deepseek_v4.py), loading, and hand-built paged batches.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/test_model.h"
#include "deepinfer/model/deepseek_v4.h"
#include "deepinfer/model/format/safetensors.h"

namespace deepinfer::v4test {

// Both sides compute in float32 from the same bf16 weights; only summation order differs
// (rounding ~1e-6 relative through 2-4 layers of O(1) values), so logits differ by ~1e-5. 2e-3
// still catches any real mistake: a wrong RoPE pairing, a missed sink, one different expert or
// indexer choice, or a window off by one moves logits by > 0.01.
constexpr float kTol = 2e-3f;
inline const char* const kFixtures[] = {"h2_mixed", "h4_deepseek", "h2_hfnames", "fp8_ue8m0",
                                        "fp4_e2m1"};

inline std::string fixture_dir(const std::string& name) {
  return testing::source_dir() + "/tests/reference/fixtures/deepseek_v4/" + name;
}

inline nlohmann::json expected(const std::string& name) {
  std::ifstream in(fixture_dir(name) + "/expected.json");
  EXPECT_TRUE(in.good()) << name << "/expected.json missing";
  return nlohmann::json::parse(in);
}

inline Result<std::unique_ptr<model::Model>> open_dir(const std::string& dir) {
  DI_ASSIGN_OR_RETURN(auto st, format::SafetensorsModel::open(dir));
  model::WeightSource src;
  src.safetensors = st;
  src.description = dir;
  return model::load_model(src);
}

inline std::unique_ptr<model::Model> open_fixture(const std::string& name) {
  auto m = open_dir(fixture_dir(name));
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return nullptr;
  EXPECT_NE(dynamic_cast<model::DeepseekV4*>(m->get()), nullptr)
      << name << " did not load as DeepseekV4";
  return std::move(m).value();
}

// The smallest block size the model accepts (a multiple of its compression ratios), at least 4.
inline int block_size_of(const model::Model& m) {
  return std::max(4, m.kv_cache_spec().block_size_multiple);
}

// One sequence's state in a hand-driven paged cache: its physical blocks, in order, and its
// recent slabs: block i's recent rows live in slab slab_base + i % slab_ring (slab_ring 0: slab =
// block id). Blocks a step no longer reads get slab -1, so a ring smaller than the sequence
// proves that nothing older than recent_tokens is read (a reused slab holds other rows).
struct PagedSeq {
  std::vector<int32_t> ids;
  std::vector<int32_t> blocks;
  int computed = 0;  // tokens already in the cache
  int slab_base = 0;
  int slab_ring = 0;
};

// Adds `n` new tokens of `s` (from s.ids[s.computed]) to `b`, with logits for every new token.
inline void add_step(ForwardBatch& b, PagedSeq& s, int n, int block_size, int recent_tokens = 0) {
  if (b.seq_token_start.empty()) {
    b.seq_token_start = {0};
    b.block_table_indptr = {0};
  }
  for (int i = 0; i < n; ++i) {
    const int pos = s.computed + i;
    b.logits_rows.push_back(b.num_tokens());
    b.token_ids.push_back(s.ids[pos]);
    b.positions.push_back(pos);
    b.slot_mapping.push_back(s.blocks[pos / block_size] * block_size + pos % block_size);
  }
  s.computed += n;
  b.seq_token_start.push_back(b.num_tokens());
  b.seq_context_len.push_back(s.computed);
  const int used = (s.computed + block_size - 1) / block_size;
  const int first_read = std::max(0, s.computed - n - recent_tokens) / block_size;
  for (int i = 0; i < used; ++i) {
    b.block_table.push_back(s.blocks[i]);
    b.recent_slab_table.push_back(s.slab_ring == 0 ? s.blocks[i]
                                  : i < first_read ? -1
                                                   : s.slab_base + i % s.slab_ring);
  }
  b.block_table_indptr.push_back(static_cast<int32_t>(b.block_table.size()));
}

inline float max_abs_diff(const float* a, const std::vector<float>& ref) {
  float worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float d = std::fabs(a[i] - ref[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;  // NaN counts as the worst
  }
  return worst;
}

inline int argmax(const float* v, int64_t n) {
  int best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = static_cast<int>(i);
  return best;
}

}  // namespace deepinfer::v4test
