// --kv-cache-dtype with no model: what each name resolves to, the refusal for hybrid state,
// and the memory plan (a 16-bit cache fits twice the blocks in the same budget).
#include <gtest/gtest.h>

#include "deepinfer/engine/kv_cache_plan.h"
#include "deepinfer/model/kv_cache.h"

namespace deepinfer::engine {
namespace {

model::KvCacheSpec plain_spec() { return {/*layers*/ 30, /*kv_heads*/ 3, /*k*/ 64, /*v*/ 64}; }

model::KvCacheSpec hybrid_spec() {
  model::KvCacheSpec s;
  s.num_layers = 2;
  s.state_kinds = {{"compressed_entries", 0, 16, 4, false}, {"window_rows", 1, 8, 1, true}};
  s.recent_tokens = 8;
  s.block_size_multiple = 4;
  return s;
}

TEST(KvCacheDtype, NamesResolve) {
  const model::KvCacheSpec s = plain_spec();
  EXPECT_EQ(*model::resolve_kv_cache_dtype("auto", s, "llama"), DType::kF32);
  EXPECT_EQ(*model::resolve_kv_cache_dtype("f32", s, "llama"), DType::kF32);
  EXPECT_EQ(*model::resolve_kv_cache_dtype("bf16", s, "llama"), DType::kBF16);
  EXPECT_EQ(*model::resolve_kv_cache_dtype("f16", s, "llama"), DType::kF16);
  const auto bad = model::resolve_kv_cache_dtype("fp8", s, "llama");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'fp8'"), std::string::npos) << bad.status().message();
}

TEST(KvCacheDtype, HybridStateIsF32Only) {
  const model::KvCacheSpec s = hybrid_spec();
  EXPECT_EQ(*model::resolve_kv_cache_dtype("auto", s, "deepseek_v4"), DType::kF32);
  for (const char* name : {"bf16", "f16"}) {
    const auto r = model::resolve_kv_cache_dtype(name, s, "deepseek_v4");
    ASSERT_FALSE(r.is_ok()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("deepseek_v4"), std::string::npos) << r.status().message();
  }
}

TEST(KvCacheDtype, SixteenBitHalvesBlockBytesAndDoublesThePlannedBlocks) {
  model::KvCacheSpec f32 = plain_spec();
  model::KvCacheSpec bf16 = plain_spec();
  bf16.dtype = DType::kBF16;
  EXPECT_EQ(model::KvCache::bytes_per_block(f32, 16), size_t{16} * 30 * 3 * 128 * 4);
  EXPECT_EQ(model::KvCache::bytes_per_block(bf16, 16), model::KvCache::bytes_per_block(f32, 16) / 2);
  EXPECT_DOUBLE_EQ(bf16.paged_bytes_per_token(), f32.paged_bytes_per_token() / 2);
  KvCachePlanInput in;
  in.kv_cache_bytes = size_t{64} << 20;
  const KvCachePlan a = plan_kv_cache(f32, in), b = plan_kv_cache(bf16, in);
  EXPECT_EQ(b.num_blocks, 2 * a.num_blocks);
  // The pools really are that size.
  const model::KvCache c = model::KvCache::allocate(bf16, 4, 16);
  EXPECT_EQ(c.k[0].size(), size_t{4} * 16 * 3 * 64 * 2);
  EXPECT_EQ(c.dtype(), DType::kBF16);
}

}  // namespace
}  // namespace deepinfer::engine
