// The model runner on its own, driven with hand-made RunnerInput / SamplingInput values on the
// tiny Llama fixture: its tokens and logprobs equal the engine's for the same request (greedy,
// and seeded sampling with penalties), an allowed-token mask is respected, and a row with
// non-finite logits comes back as an error row while the other rows of the batch are sampled.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/model_runner.h"
#include "tiny_llama_fixture.h"

namespace deepinfer::engine {
namespace {

constexpr int kBlockSize = 4;

ModelRunnerConfig runner_config() {
  ModelRunnerConfig c;
  c.num_threads = 1;
  c.block_size = kBlockSize;
  c.num_kv_blocks = 64;
  return c;
}

RunnerSeq make_seq(int64_t id, int first, std::vector<int32_t> tokens, std::vector<int32_t> blocks, bool samples) {
  RunnerSeq s;
  s.seq_id = id;
  s.first_position = first;
  s.token_ids = std::move(tokens);
  s.block_table = std::move(blocks);
  s.samples = samples;
  return s;
}

struct Generated {
  std::vector<int32_t> tokens;
  std::vector<LogprobEntry> logprobs;
};

// Runs one sequence to `n` tokens through the runner alone: its prompt in one step, then one
// token a step, with blocks first_block, first_block + 1, ... as its block table.
Generated run_alone(ModelRunner& runner, const std::vector<int32_t>& prompt, const SamplingParams& p,
                    int n, uint64_t request_key, int first_block = 0) {
  Generated g;
  std::vector<int32_t> history = prompt;
  const bool penalties = p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  int computed = 0;
  for (int step = 0; step < n; ++step) {
    RunnerInput in;
    RunnerSeq& s = in.seqs.emplace_back();
    s.seq_id = static_cast<int64_t>(request_key);
    s.first_position = computed;
    s.token_ids.assign(history.begin() + computed, history.end());
    const int end = static_cast<int>(history.size());
    for (int b = 0; b < (end + kBlockSize - 1) / kBlockSize; ++b) s.block_table.push_back(first_block + b);
    s.samples = true;
    Status st = runner.execute(in);
    EXPECT_TRUE(st.is_ok()) << st.message();
    computed = end;
    SamplingInput si;
    SamplingRow& row = si.rows.emplace_back();
    row.params = p;
    row.request_key = request_key;
    row.step = static_cast<uint64_t>(step);
    if (penalties) {
      row.history = history;
      row.num_prompt = prompt.size();
    }
    RunnerOutput out = runner.sample(si);
    EXPECT_EQ(out.rows.size(), 1u);
    EXPECT_TRUE(out.rows[0].error.empty()) << out.rows[0].error;
    const SampledRow& r = out.rows[0];
    g.tokens.push_back(r.token);
    LogprobEntry e{r.token, r.logprob, {}};
    for (const auto& t : r.top_logprobs) e.top.emplace_back(t.token, t.logprob);
    g.logprobs.push_back(std::move(e));
    history.push_back(r.token);
  }
  return g;
}

Generated run_engine(const GenerationRequest& r, bool overlap) {
  EngineConfig cfg;
  cfg.num_threads = 1;
  cfg.block_size = kBlockSize;
  cfg.kv_cache_bytes = size_t{1} << 20;
  cfg.overlap_scheduling = overlap;
  auto e = Engine::create(runnertest::open_model(), runnertest::byte_tokenizer(), cfg);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  Generated g;
  if (!e.is_ok()) return g;
  auto id = (*e)->add_request(r);
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  while ((*e)->has_unfinished()) {
    for (const RequestOutput& out : (*e)->step()) {
      EXPECT_TRUE(out.error.empty()) << out.error;
      g.tokens.insert(g.tokens.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      g.logprobs.insert(g.logprobs.end(), out.new_logprobs.begin(), out.new_logprobs.end());
    }
  }
  return g;
}

void expect_same(const Generated& a, const Generated& b) {
  ASSERT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    EXPECT_EQ(a.logprobs[i].token_id, b.logprobs[i].token_id);
    EXPECT_EQ(std::memcmp(&a.logprobs[i].logprob, &b.logprobs[i].logprob, sizeof(float)), 0) << "step " << i;
    EXPECT_EQ(a.logprobs[i].top, b.logprobs[i].top) << "step " << i;
  }
}

const std::vector<int32_t> kPrompt = {1, 17, 42, 255, 0, 9, 33};

TEST(ModelRunner, GreedyTokensAndLogprobsEqualTheEngines) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 3;
  ModelRunner runner(runnertest::open_model(), runner_config());
  // The engine numbers its first request 1: the same draw stream.
  const Generated alone = run_alone(runner, kPrompt, p, 6, 1);
  GenerationRequest r;
  r.prompt_ids = kPrompt;
  r.sampling = p;
  r.max_tokens = 6;
  r.ignore_eos = true;
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    expect_same(alone, run_engine(r, overlap));
  }
  EXPECT_EQ(alone.logprobs[0].top.size(), 3u);
}

TEST(ModelRunner, SeededSamplingWithPenaltiesEqualsTheEngines) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.seed = 7;
  p.has_seed = true;
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.2f;
  p.logprobs = 2;
  ModelRunner runner(runnertest::open_model(), runner_config());
  const Generated alone = run_alone(runner, kPrompt, p, 8, 1);
  GenerationRequest r;
  r.prompt_ids = kPrompt;
  r.sampling = p;
  r.max_tokens = 8;
  r.ignore_eos = true;
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    expect_same(alone, run_engine(r, overlap));
  }
}

TEST(ModelRunner, AllowedMaskIsRespected) {
  ModelRunner runner(runnertest::open_model(), runner_config());
  const std::set<int32_t> allowed = {7, 42, 200};
  std::vector<uint32_t> mask(256 / 32, 0u);
  for (int32_t t : allowed) mask[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
  for (uint64_t seed = 0; seed < 12; ++seed) {
    RunnerInput in;
    in.seqs.push_back(make_seq(1, 0, kPrompt, {0, 1}, true));
    ASSERT_TRUE(runner.execute(in).is_ok());
    SamplingInput si;
    SamplingRow& row = si.rows.emplace_back();
    row.params.temperature = seed == 0 ? 0.0f : 1.5f;
    row.params.seed = seed;
    row.params.has_seed = true;
    row.params.logprobs = 5;
    row.allowed_mask = mask;
    const SampledRow r = runner.sample(si).rows.at(0);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_TRUE(allowed.count(r.token)) << r.token;
    // Logprobs are over the allowed tokens only: three of them, summing to probability 1.
    ASSERT_EQ(r.top_logprobs.size(), allowed.size());
    double total = 0;
    for (const auto& t : r.top_logprobs) {
      EXPECT_TRUE(allowed.count(t.token)) << t.token;
      total += std::exp(static_cast<double>(t.logprob));
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(ModelRunner, NonFiniteLogitsAreAnErrorRowAndOtherRowsAreSampled) {
  const std::string dir = ::testing::TempDir() + "runner_nan_embedding";
  runnertest::write_nan_embedding_copy(dir, 200);
  ModelRunner broken(runnertest::open_model(dir), runner_config());
  ModelRunner clean(runnertest::open_model(), runner_config());
  const std::vector<int32_t> good = {1, 5, 6, 7, 8};
  const std::vector<int32_t> bad = {1, 200, 6};
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 0;
  const Generated want = run_alone(clean, good, p, 1, 3);

  RunnerInput in;
  in.seqs.push_back(make_seq(1, 0, bad, {0}, true));
  in.seqs.push_back(make_seq(2, 0, {1, 2, 3}, {1}, true));  // skipped below
  in.seqs.push_back(make_seq(3, 0, good, {2, 3}, true));
  ASSERT_TRUE(broken.execute(in).is_ok());
  SamplingInput si;
  si.rows.resize(3);
  for (auto& row : si.rows) row.params = p;
  si.rows[1].skip = true;
  si.rows[2].request_key = 3;
  const RunnerOutput out = broken.sample(si);
  ASSERT_EQ(out.rows.size(), 3u);
  EXPECT_EQ(out.rows[0].token, -1);
  EXPECT_NE(out.rows[0].error.find("the model produced non-finite logits"), std::string::npos) << out.rows[0].error;
  EXPECT_EQ(out.rows[1].token, -1);
  EXPECT_TRUE(out.rows[1].error.empty());
  EXPECT_TRUE(out.rows[2].error.empty()) << out.rows[2].error;
  EXPECT_EQ(out.rows[2].token, want.tokens[0]);
  EXPECT_EQ(out.rows[2].logprob, want.logprobs[0].logprob);
}

// Prompt logprobs: scoring a fixture prompt in two chunks gives the log-softmax of the
// Hugging Face reference logits (expected.json) at each position, and the top lists are the
// reference's best tokens.
TEST(ModelRunner, ScoredPromptTokensMatchTheReferenceLogits) {
  std::ifstream f(runnertest::fixture_dir() + "/expected.json");
  const auto fx = nlohmann::json::parse(f);
  const auto& c = fx["cases"][1];
  const auto ids = c["ids"].get<std::vector<int32_t>>();
  ASSERT_GE(ids.size(), 4u);
  ModelRunner runner(runnertest::open_model(), runner_config());
  const int split = static_cast<int>(ids.size()) / 2;
  std::vector<SampledRow> got;
  for (int chunk = 0; chunk < 2; ++chunk) {
    const int first = chunk == 0 ? 0 : split;
    const int end = chunk == 0 ? split : static_cast<int>(ids.size());
    RunnerSeq s = make_seq(1, first, std::vector<int32_t>(ids.begin() + first, ids.begin() + end), {}, chunk == 1);
    for (int b = 0; b < (end + kBlockSize - 1) / kBlockSize; ++b) s.block_table.push_back(b);
    // The token after each position of the chunk, but the last prompt position (it samples).
    for (int pos = first; pos < std::min(end, static_cast<int>(ids.size()) - 1); ++pos) s.score_tokens.push_back(ids[pos + 1]);
    s.score_top_n = 3;
    RunnerInput in;
    in.seqs.push_back(s);
    ASSERT_TRUE(runner.execute(in).is_ok());
    SamplingInput si;
    if (chunk == 1) si.rows.emplace_back().params.temperature = 0.0f;
    RunnerOutput out = runner.sample(si);
    ASSERT_EQ(out.scored.size(), 1u);
    EXPECT_EQ(out.scored[0].first_position, first);
    EXPECT_TRUE(out.scored[0].error.empty());
    got.insert(got.end(), out.scored[0].rows.begin(), out.scored[0].rows.end());
  }
  ASSERT_EQ(got.size(), ids.size() - 1);
  for (size_t pos = 0; pos + 1 < ids.size(); ++pos) {
    const auto ref = c["logits"][pos].get<std::vector<double>>();
    double mx = ref[0], sum = 0;
    for (double x : ref) mx = std::max(mx, x);
    for (double x : ref) sum += std::exp(x - mx);
    auto ref_logprob = [&](int32_t t) { return ref[static_cast<size_t>(t)] - mx - std::log(sum); };
    EXPECT_EQ(got[pos].token, ids[pos + 1]);
    EXPECT_NEAR(got[pos].logprob, ref_logprob(ids[pos + 1]), 2e-3) << "position " << pos;
    ASSERT_EQ(got[pos].top_logprobs.size(), 3u);
    EXPECT_NEAR(got[pos].top_logprobs[0].logprob, ref_logprob(static_cast<int32_t>(
        std::max_element(ref.begin(), ref.end()) - ref.begin())), 2e-3) << "position " << pos;
    for (const auto& t : got[pos].top_logprobs) EXPECT_NEAR(t.logprob, ref_logprob(t.token), 2e-3);
  }
}

// Through the engine: prompt logprobs come with the first token, cover prompt tokens 1.., do
// not depend on the chunking, and a prompt whose prefix is cached is computed anyway.
TEST(ModelRunner, EnginePromptLogprobsSkipThePrefixCache) {
  EngineConfig cfg;
  cfg.num_threads = 1;
  cfg.block_size = kBlockSize;
  cfg.kv_cache_bytes = size_t{1} << 20;
  cfg.max_num_batched_tokens = 5;  // the 11-token prompt runs in three chunks
  auto e = Engine::create(runnertest::open_model(), runnertest::byte_tokenizer(), cfg);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  GenerationRequest r;
  r.prompt_ids = {1, 17, 42, 255, 0, 9, 33, 80, 81, 82, 83};
  r.sampling.temperature = 0.0f;
  r.max_tokens = 2;
  r.ignore_eos = true;
  auto run = [&](const GenerationRequest& req) {
    auto id = (*e)->add_request(req);
    EXPECT_TRUE(id.is_ok()) << id.status().message();
    std::vector<RequestOutput> outs;
    while ((*e)->has_unfinished())
      for (RequestOutput& o : (*e)->step()) outs.push_back(std::move(o));
    return outs;
  };
  (void)run(r);  // caches the prompt's full blocks
  r.prompt_logprobs = 2;
  const std::vector<RequestOutput> outs = run(r);
  ASSERT_FALSE(outs.empty());
  EXPECT_EQ(outs.back().cached_tokens, 0);
  std::vector<LogprobEntry> got;
  for (const auto& o : outs) {
    if (!o.prompt_logprobs.empty()) {
      EXPECT_FALSE(o.new_token_ids.empty());
    }
    got.insert(got.end(), o.prompt_logprobs.begin(), o.prompt_logprobs.end());
  }
  ASSERT_EQ(got.size(), r.prompt_ids.size() - 1);

  // The same numbers from the runner alone, scoring the whole prompt in one chunk.
  ModelRunner runner(runnertest::open_model(), runner_config());
  RunnerSeq s = make_seq(1, 0, r.prompt_ids, {0, 1, 2}, false);
  s.score_tokens.assign(r.prompt_ids.begin() + 1, r.prompt_ids.end());
  s.score_top_n = 2;
  RunnerInput in;
  in.seqs.push_back(s);
  ASSERT_TRUE(runner.execute(in).is_ok());
  const RunnerOutput ro = runner.sample({});
  ASSERT_EQ(ro.scored.size(), 1u);
  ASSERT_EQ(ro.scored[0].rows.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token_id, r.prompt_ids[i + 1]);
    EXPECT_NEAR(got[i].logprob, ro.scored[0].rows[i].logprob, 1e-5) << i;
    ASSERT_EQ(got[i].top.size(), 2u);
    EXPECT_EQ(got[i].top[0].first, ro.scored[0].rows[i].top_logprobs[0].token) << i;
  }
  GenerationRequest bad = r;
  bad.prompt_logprobs = 21;
  EXPECT_FALSE((*e)->add_request(bad).is_ok());
}

// Through the engine: the request whose logits are broken ends with an error, the others in
// the same batches go on unchanged, and every KV block is free at the end.
TEST(ModelRunner, EngineEndsOnlyTheRequestWithNonFiniteLogits) {
  const std::string dir = ::testing::TempDir() + "engine_nan_embedding";
  runnertest::write_nan_embedding_copy(dir, 200);
  GenerationRequest good;
  good.prompt_ids = {1, 5, 6, 7, 8};
  good.sampling.temperature = 0.0f;
  good.max_tokens = 6;
  good.ignore_eos = true;
  const Generated want = run_engine(good, false);
  GenerationRequest bad = good;
  bad.prompt_ids = {1, 200, 6};
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    EngineConfig cfg;
    cfg.num_threads = 1;
    cfg.block_size = kBlockSize;
    cfg.kv_cache_bytes = size_t{1} << 20;
    cfg.overlap_scheduling = overlap;
    auto e = Engine::create(runnertest::open_model(dir), runnertest::byte_tokenizer(), cfg);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    const int64_t a = *(*e)->add_request(good);
    const int64_t b = *(*e)->add_request(bad);
    std::map<int64_t, std::vector<int32_t>> tokens;
    std::map<int64_t, RequestOutput> last;
    while ((*e)->has_unfinished()) {
      for (const RequestOutput& out : (*e)->step()) {
        auto& t = tokens[out.request_id];
        t.insert(t.end(), out.new_token_ids.begin(), out.new_token_ids.end());
        if (out.finished) last[out.request_id] = out;
      }
    }
    EXPECT_EQ(tokens[a], want.tokens);
    EXPECT_EQ(last[a].finish_reason, FinishReason::kLength);
    EXPECT_TRUE(last[a].error.empty()) << last[a].error;
    EXPECT_TRUE(tokens[b].empty());
    ASSERT_TRUE(last.count(b));
    EXPECT_EQ(last[b].finish_reason, FinishReason::kAbort);
    EXPECT_NE(last[b].error.find("the model produced non-finite logits"), std::string::npos) << last[b].error;
    EXPECT_EQ((*e)->kv_num_available_blocks(), (*e)->kv_num_blocks());
  }
}

}  // namespace
}  // namespace deepinfer::engine
