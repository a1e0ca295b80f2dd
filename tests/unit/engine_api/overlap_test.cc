// Overlap scheduling changes when work happens, never what comes out: a mixed batch (stop
// strings, EOS, aborts, preemption in a tiny KV pool, grammar requests, sampling with
// penalties and logprobs) gives the same tokens, text, logprobs and finish reasons with it on
// and off, and every block is back in the pool at the end.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "../common/default_engine.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/model/format/gguf.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer {
namespace {

struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<float> logprobs;
  engine::FinishReason reason = engine::FinishReason::kNone;
  bool finished = false;
  int completion_tokens = -1;
  std::string error;
  bool operator==(const Result& o) const {
    return tokens == o.tokens && text == o.text && reason == o.reason && finished == o.finished &&
           completion_tokens == o.completion_tokens && error == o.error &&
           logprobs.size() == o.logprobs.size() &&
           std::memcmp(logprobs.data(), o.logprobs.data(), logprobs.size() * sizeof(float)) == 0;
  }
};

class Overlap : public ::testing::Test {
 protected:
  void SetUp() override {
    DI_REQUIRE_DEFAULT_MODEL();
    model_ = testing::DefaultModel::open();
    ASSERT_TRUE(model_.tokenizer);
  }

  std::unique_ptr<engine::Engine> make_engine(bool overlap, size_t kv_bytes, int max_num_seqs,
                                              int budget, int block_size = 16) {
    engine::EngineConfig cfg;
    cfg.num_threads = 2;
    cfg.max_num_seqs = max_num_seqs;
    cfg.max_num_batched_tokens = budget;
    cfg.batch_invariant = true;  // recompute after preemption gives the very same logits
    cfg.kv_cache_bytes = kv_bytes;
    cfg.block_size = block_size;
    cfg.overlap_scheduling = overlap;
    auto e = model_.engine(cfg);
    if (e) {
      EXPECT_EQ(e->overlap_scheduling(), overlap);
    }
    return e;
  }

  engine::GenerationRequest request(const std::string& text, int max_tokens, float temperature,
                                    uint64_t seed) const {
    engine::GenerationRequest r;
    r.prompt_ids = model_.tokenizer->encode(text);
    r.max_tokens = max_tokens;
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    r.sampling.has_seed = true;
    r.sampling.logprobs = 2;
    return r;
  }

  std::vector<engine::GenerationRequest> mixed_requests() const {
    std::vector<engine::GenerationRequest> v;
    const char* prompts[] = {"The capital of France is", "Once upon a time, there was",
                             "def fibonacci(n):", "List three colors:", "Water boils at",
                             "My favourite animal is", "1, 2, 3, 4,", "The sun rises in the"};
    for (int i = 0; i < 8; ++i) {
      auto r = request(prompts[i], 5 + i, i % 2 ? 0.9f : 0.0f, 100 + i);
      if (i % 3 == 0) r.stop = {" the", ".", "\n"};  // likely to hit within a few tokens
      if (i == 5) r.sampling.repetition_penalty = 1.3f;
      if (i == 6) r.ignore_eos = true;
      v.push_back(std::move(r));
    }
    auto g = request("A JSON object with a name:", 14, 0.7f, 7);
    g.grammar = structured::GrammarSpec{structured::GrammarSpec::kRegex,
                                             "\\{\"name\": \"[a-z]{1,8}\"\\}", {}};
    v.push_back(std::move(g));
    return v;
  }

  // Runs every request; aborts request `abort_index` once it has produced `abort_after` tokens.
  static std::map<int, Result> run(engine::Engine& e, const std::vector<engine::GenerationRequest>& reqs,
                                   int abort_index, int abort_after) {
    std::map<int64_t, int> index_of;
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto id = e.add_request(reqs[i]);
      EXPECT_TRUE(id.is_ok());
      index_of[*id] = static_cast<int>(i);
    }
    std::map<int, Result> res;
    int64_t abort_id = -1;
    for (auto& [id, i] : index_of)
      if (i == abort_index) abort_id = id;
    int steps = 0;
    while (e.has_unfinished() && ++steps < 2000) {
      for (const auto& o : e.step()) {
        Result& r = res[index_of.at(o.request_id)];
        r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        r.text += o.new_text;
        for (const auto& lp : o.new_logprobs) {
          r.logprobs.push_back(lp.logprob);
          for (const auto& [tok, p] : lp.top) r.logprobs.push_back(p);
        }
        if (o.finished) {
          EXPECT_FALSE(r.finished) << "request " << o.request_id << " finished twice";
          r.finished = true;
          r.reason = o.finish_reason;
          r.completion_tokens = o.completion_tokens;
          r.error = o.error;
        }
      }
      if (abort_id >= 0 && static_cast<int>(res[abort_index].tokens.size()) >= abort_after) {
        e.abort(abort_id);
        res[abort_index].reason = engine::FinishReason::kAbort;
        abort_id = -1;
      }
    }
    EXPECT_FALSE(e.has_unfinished());
    EXPECT_EQ(e.num_running(), 0);
    EXPECT_EQ(e.num_waiting(), 0);
    return res;
  }

  testing::DefaultModel model_;
};

void expect_same(const std::map<int, Result>& off, const std::map<int, Result>& on) {
  ASSERT_EQ(off.size(), on.size());
  for (const auto& [i, r] : off) {
    const Result& o = on.at(i);
    EXPECT_TRUE(r == o) << "request " << i << " differs: off \"" << r.text << "\" ("
                        << r.tokens.size() << " tokens) vs on \"" << o.text << "\" ("
                        << o.tokens.size() << " tokens)";
  }
}

TEST_F(Overlap, SameOutputsOnAndOffForAMixedBatch) {
  const auto reqs = mixed_requests();
  auto off = make_engine(false, size_t{256} << 20, 16, 64);
  auto on = make_engine(true, size_t{256} << 20, 16, 64);
  const auto a = run(*off, reqs, 4, 3);
  const auto b = run(*on, reqs, 4, 3);
  expect_same(a, b);
  // The batch did exercise what it is meant to.
  int stops = 0, grammar_done = 0;
  for (const auto& [i, r] : a) {
    if (!reqs[i].stop.empty() && r.reason == engine::FinishReason::kStop) ++stops;
    if (reqs[i].grammar && r.finished) ++grammar_done;
  }
  EXPECT_GT(stops, 0);
  EXPECT_EQ(grammar_done, 1);
  EXPECT_EQ(a.at(4).tokens.size(), 3u);  // aborted after 3 tokens, none more reported
  EXPECT_EQ(a.at(8).text.substr(0, 10), "{\"name\": \"");
  EXPECT_EQ(on->stats().generated_tokens, off->stats().generated_tokens);
  EXPECT_EQ(on->kv_stats().hit_tokens, off->kv_stats().hit_tokens);
}

TEST_F(Overlap, SameOutputsOnAndOffWithPreemption) {
  // 16 blocks of 4 tokens for 9 requests of ~10-20 tokens: preemption by recompute, often
  // while the victim's next token is in flight (then discarded and drawn again).
  const auto reqs = mixed_requests();
  auto off = make_engine(false, 1, 10, 32, 4);
  auto on = make_engine(true, 1, 10, 32, 4);
  const auto a = run(*off, reqs, 2, 5);
  const auto b = run(*on, reqs, 2, 5);
  expect_same(a, b);
  EXPECT_GT(on->stats().steps, 0);
}

TEST_F(Overlap, IdleTimeIsMeasured) {
  // Not a timing assertion: only that idle time is measured and stays a fraction.
  auto on = make_engine(true, size_t{64} << 20, 4, 64);
  std::vector<engine::GenerationRequest> reqs(4, request("Hello", 6, 0.0f, 1));
  for (auto& r : reqs) r.ignore_eos = true;
  run(*on, reqs, -1, 0);
  const auto& s = on->stats();
  EXPECT_GT(s.forward_seconds, 0);
  EXPECT_GT(s.idle_seconds, 0);
  EXPECT_LT(s.idle_share(), 1);
  EXPECT_EQ(s.generated_tokens, 24);
}

}  // namespace
}  // namespace deepinfer
