// DeepSeek-V3 forward against transformers' DeepseekV3ForCausalLM on the tiny checkpoints of
// tests/reference/make_tiny_deepseek_v3.py: logits at every position (one prefill), the same
// through a paged cache driven prefill-then-decode (expanded then absorbed MLA), absorbed vs
// expanded on identical inputs, greedy continuations, and the MTP head's logits.
#include "ds_fixture.h"

namespace deepinfer {
namespace {

using dstest::PagedSeq;

// Both sides compute in float32 from the same bf16 weights; only summation order differs (dot
// products of <= 128 terms through <= 4 layers, rounding ~1e-6 relative), and logits are O(1),
// so differences are ~1e-5. 1e-3 still catches any real mistake (wrong RoPE pairing, a wrong
// routing choice or mscale moves logits by > 0.01).
constexpr float kTol = 1e-3f;
const char* const kFixtures[] = {"moe_yarn", "no_qlora", "dense_heavy", "fp8"};

class DeepseekV3Fixture : public ::testing::TestWithParam<const char*> {};

// With a 16-bit latent cache every cached element is rounded (relative 2^-9 bf16, 2^-12 f16)
// before attention reads it. Measured worst |logit - HF| over the four fixtures, prefill and
// paged alike: bf16 3.2e-2 (fp8; the others 1.0-1.4e-2), f16 4.8e-3 (fp8; the others 1.2-1.8e-3).
// The bounds are about twice that: still far below what a wrong RoPE pairing, routing choice or
// latent layout does (> 0.1 on logits of O(1)). Greedy steps are compared up to the reference's
// first top-1/top-2 margin below the bound (the tiny random models have many small margins, so
// with bf16 fewer steps qualify: 3-10 per fixture, against 24 in f32).
constexpr float kBf16Tol = 0.06f;
constexpr float kF16Tol = 0.01f;

void prefill_logits_match(const std::string& name, DType kv_dtype, float tol) {
  auto m = dstest::open_fixture(name);
  ASSERT_NE(m, nullptr);
  const int64_t V = m->config().vocab_size;
  ThreadPool pool(2);
  float worst = 0;
  const auto fx = dstest::expected(name);
  for (const auto& c : fx["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::vector<float> logits = testing::all_position_logits(*m, ids, pool, {}, {}, kv_dtype);
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      const float d = dstest::max_abs_diff(logits.data() + pos * V, c["logits"][pos].get<std::vector<float>>());
      EXPECT_LT(d, tol) << name << ": " << ids.size() << " tokens, position " << pos;
      worst = std::max(worst, d);
    }
  }
  std::printf("%s prefill, KV %s: max |logit - HF| = %.2e\n", name.c_str(),
              std::string(dtype_name(kv_dtype)).c_str(), worst);
}

TEST_P(DeepseekV3Fixture, PrefillLogitsMatchTransformers) {
  prefill_logits_match(GetParam(), DType::kF32, kTol);
}

TEST_P(DeepseekV3Fixture, PrefillLogitsMatchTransformersWith16BitKvCache) {
  prefill_logits_match(GetParam(), DType::kBF16, kBf16Tol);
  prefill_logits_match(GetParam(), DType::kF16, kF16Tol);
}

// Two sequences through a paged cache with scattered blocks: sequence A prefills 5 tokens then
// decodes one token per step while sequence B prefills in chunks of 3 in the same batches, so
// one step mixes the expanded (chunk) and absorbed (decode) forms.
void paged_prefill_then_decode(const std::string& name, DType kv_dtype, float tol) {
  auto m = dstest::open_fixture(name);
  ASSERT_NE(m, nullptr);
  const int64_t V = m->config().vocab_size;
  const auto fx = dstest::expected(name);
  const int block_size = 4;
  model::KvCacheSpec spec = m->kv_cache_spec();
  spec.dtype = kv_dtype;
  model::KvCache cache = model::KvCache::allocate(spec, 16, block_size);
  PagedSeq a{fx["cases"][2]["ids"].get<std::vector<int32_t>>(), {9, 2, 14, 5, 0}, 0};
  PagedSeq b{fx["cases"][1]["ids"].get<std::vector<int32_t>>(), {7, 3, 11}, 0};
  const auto& ref_a = fx["cases"][2]["logits"];
  const auto& ref_b = fx["cases"][1]["logits"];
  ThreadPool pool(1);  // many tiny steps: worker hand-offs would dominate
  model::ForwardContext ctx{&pool, false};
  float worst = 0;
  bool first = true;
  while (a.computed < static_cast<int>(a.ids.size()) || b.computed < static_cast<int>(b.ids.size())) {
    ForwardBatch batch;
    std::vector<std::pair<PagedSeq*, const nlohmann::json*>> order;
    std::vector<int> starts;
    if (a.computed < static_cast<int>(a.ids.size())) {
      starts.push_back(a.computed);
      dstest::add_step(batch, a, first ? 5 : 1, block_size);
      order.push_back({&a, &ref_a});
    }
    if (b.computed < static_cast<int>(b.ids.size())) {
      starts.push_back(b.computed);
      dstest::add_step(batch, b, std::min<int>(3, b.ids.size() - b.computed), block_size);
      order.push_back({&b, &ref_b});
    }
    first = false;
    std::vector<float> logits(batch.logits_rows.size() * V);
    Status st = m->forward(batch, cache, ctx, logits.data());
    ASSERT_TRUE(st.is_ok()) << st.message();
    for (size_t s = 0; s < order.size(); ++s) {
      for (int t = batch.seq_token_start[s]; t < batch.seq_token_start[s + 1]; ++t) {
        const int pos = starts[s] + (t - batch.seq_token_start[s]);
        const float d = dstest::max_abs_diff(logits.data() + int64_t{t} * V,
                                             (*order[s].second)[pos].get<std::vector<float>>());
        EXPECT_LT(d, tol) << name << ": sequence " << s << " position " << pos;
        worst = std::max(worst, d);
      }
    }
  }
  std::printf("%s paged, KV %s: max |logit - HF| = %.2e\n", name.c_str(),
              std::string(dtype_name(kv_dtype)).c_str(), worst);
}

TEST_P(DeepseekV3Fixture, PagedPrefillThenDecodeMatchesTransformers) {
  paged_prefill_then_decode(GetParam(), DType::kF32, kTol);
}

TEST_P(DeepseekV3Fixture, PagedPrefillThenDecodeMatchesTransformersWith16BitKvCache) {
  paged_prefill_then_decode(GetParam(), DType::kBF16, kBf16Tol);
  paged_prefill_then_decode(GetParam(), DType::kF16, kF16Tol);
}

TEST_P(DeepseekV3Fixture, AbsorbedAndExpandedAttentionAgree) {
  const std::string name = GetParam();
  auto m = dstest::open_fixture(name);
  ASSERT_NE(m, nullptr);
  const auto ids = dstest::expected(name)["cases"][2]["ids"].get<std::vector<int32_t>>();
  ThreadPool pool(2);
  m->set_mla_mode(model::MlaMode::kExpanded);
  const std::vector<float> expanded = testing::all_position_logits(*m, ids, pool);
  m->set_mla_mode(model::MlaMode::kAbsorbed);
  const std::vector<float> absorbed = testing::all_position_logits(*m, ids, pool);
  m->set_mla_mode(model::MlaMode::kAuto);
  // Same math in another association order (the latent products are regrouped): f32 rounding only.
  const float d = dstest::max_abs_diff(absorbed.data(), expanded);
  EXPECT_LT(d, 1e-4f) << name;
  std::printf("%s absorbed vs expanded: max diff %.2e\n", name.c_str(), d);
}

// Greedy decoding through the paged cache, one token per step (absorbed form), reproduces the
// reference continuation; a step whose reference top-2 margin is below the tolerance is a
// near-tie either side may take, so the comparison stops there.
// min_compared: greedy steps that must have been checked (before the reference's first near-tie).
void greedy_continuation_matches(const std::string& name, DType kv_dtype, float tol, int min_compared) {
  auto m = dstest::open_fixture(name);
  ASSERT_NE(m, nullptr);
  const int64_t V = m->config().vocab_size;
  ThreadPool pool(1);  // many tiny steps: worker hand-offs would dominate
  model::ForwardContext ctx{&pool, false};
  int compared = 0;
  const auto fx = dstest::expected(name);
  for (const auto& c : fx["cases"]) {
    const auto greedy = c["greedy"].get<std::vector<int32_t>>();
    const auto margin = c["greedy_margin"].get<std::vector<float>>();
    PagedSeq s{c["ids"].get<std::vector<int32_t>>(), {}, 0};
    for (int i = 0; i < 16; ++i) s.blocks.push_back(15 - i);
    model::KvCacheSpec spec = m->kv_cache_spec();
    spec.dtype = kv_dtype;
    model::KvCache cache = model::KvCache::allocate(spec, 16, 4);
    int n_new = static_cast<int>(s.ids.size());
    for (size_t step = 0; step < greedy.size(); ++step) {
      ForwardBatch b;
      dstest::add_step(b, s, n_new, 4);
      b.logits_rows = {b.num_tokens() - 1};
      std::vector<float> logits(V);
      ASSERT_TRUE(m->forward(b, cache, ctx, logits.data()).is_ok());
      const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (margin[step] < tol) break;
      ASSERT_EQ(next, greedy[step]) << name << " step " << step;
      ++compared;
      s.ids.push_back(next);
      n_new = 1;
    }
  }
  std::printf("%s greedy, KV %s: %d steps compared\n", name.c_str(), std::string(dtype_name(kv_dtype)).c_str(),
              compared);
  EXPECT_GE(compared, min_compared) << name << " KV " << dtype_name(kv_dtype);
}

TEST_P(DeepseekV3Fixture, GreedyContinuationMatches) {
  greedy_continuation_matches(GetParam(), DType::kF32, kTol, 12);
}

// Near-ties are the reference margins below the 16-bit tolerance.
TEST_P(DeepseekV3Fixture, GreedyContinuationMatchesWith16BitKvCache) {
  greedy_continuation_matches(GetParam(), DType::kBF16, kBf16Tol, 3);
  greedy_continuation_matches(GetParam(), DType::kF16, kF16Tol, 10);
}

INSTANTIATE_TEST_SUITE_P(Tiny, DeepseekV3Fixture, ::testing::ValuesIn(kFixtures));

TEST(DeepseekV3Mtp, NextNextTokenLogitsMatchReference) {
  for (const char* name : {"moe_yarn", "dense_heavy"}) {
    auto m = dstest::open_fixture(name);
    ASSERT_NE(m, nullptr);
    ASSERT_TRUE(m->has_mtp()) << name;
    const int64_t V = m->config().vocab_size, H = m->config().hidden_size;
    ThreadPool pool(2);
    model::ForwardContext ctx{&pool, false};
    m->set_keep_final_hidden(true);
    float worst = 0;
    const auto fx = dstest::expected(name);
    for (const auto& c : fx["cases"]) {
      const auto ids = c["ids"].get<std::vector<int32_t>>();
      testing::all_position_logits(*m, ids, pool);
      const std::vector<float> hidden = m->final_hidden();
      ASSERT_GE(hidden.size(), ids.size() * H);
      // MTP input i: token ids[i + 1] at position i with the main model's hidden state at i.
      const int n = static_cast<int>(ids.size()) - 1;
      PagedSeq s{std::vector<int32_t>(ids.begin() + 1, ids.end()), {1, 0, 3, 2, 5, 4}, 0};
      model::KvCache cache = model::KvCache::allocate(m->mtp_kv_cache_spec(), 6, 4);
      ForwardBatch b;
      dstest::add_step(b, s, n, 4);
      std::vector<float> logits(size_t(n) * V);
      Status st = m->mtp_forward(b, hidden.data(), cache, ctx, logits.data(), nullptr);
      ASSERT_TRUE(st.is_ok()) << st.message();
      for (int i = 0; i < n; ++i) {
        const float d = dstest::max_abs_diff(logits.data() + int64_t{i} * V, c["mtp_logits"][i].get<std::vector<float>>());
        EXPECT_LT(d, kTol) << name << " mtp position " << i;
        worst = std::max(worst, d);
      }
    }
    std::printf("%s mtp: max |logit - reference| = %.2e\n", name, worst);
  }
}

}  // namespace
}  // namespace deepinfer
