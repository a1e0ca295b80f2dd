// The KV store as the engine's lower tier, with no model: a tiny fake KV layout filled with
// patterned data, "processes" simulated by fresh KvCache + KvCacheManager + store over one set
// of target directories.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "deepinfer/engine/kv_store_tier.h"
#include "deepinfer/engine/scheduler.h"

namespace deepinfer::engine {
namespace {

namespace fs = std::filesystem;

constexpr int kBlockSize = 4;

model::KvCacheSpec tiny_spec() { return {/*layers*/ 3, /*kv_heads*/ 2, /*k dim*/ 4, /*v dim*/ 3}; }

// KV "computed" for token `tok` at `pos`: depends on the whole identity, so a wrong block,
// layer, position or K/V swap shows.
float pattern(int layer, bool is_v, int pos, int32_t tok, int channel) {
  return static_cast<float>(tok) * 0.5f + pos * 1000.0f + layer * 100000.0f + (is_v ? 0.25f : 0) +
         channel * 0.001f;
}

// Fabricated forward pass: writes the pattern for tokens [first, first + n) of `seq`.
void fake_forward(model::KvCache& c, const Sequence& seq, int first, int n) {
  const int64_t ks = c.k_token_stride(), vs = c.v_token_stride();
  for (int p = first; p < first + n; ++p) {
    const int64_t slot = int64_t{seq.block_table[p / c.block_size]} * c.block_size + p % c.block_size;
    for (int l = 0; l < c.spec.num_layers; ++l) {
      for (int ch = 0; ch < ks; ++ch) c.k[l].data()[slot * ks + ch] = pattern(l, false, p, seq.token_at(p), ch);
      for (int ch = 0; ch < vs; ++ch) c.v[l].data()[slot * vs + ch] = pattern(l, true, p, seq.token_at(p), ch);
    }
  }
}

// Counts tokens [0, n) of `seq` whose KV in `c` is bit-exact the pattern.
int count_exact(const model::KvCache& c, const Sequence& seq, int n) {
  const int64_t ks = c.k_token_stride(), vs = c.v_token_stride();
  int ok = 0;
  for (int p = 0; p < n; ++p) {
    const int64_t slot = int64_t{seq.block_table[p / c.block_size]} * c.block_size + p % c.block_size;
    bool good = true;
    for (int l = 0; l < c.spec.num_layers; ++l) {
      for (int ch = 0; ch < ks; ++ch) {
        float want = pattern(l, false, p, seq.token_at(p), ch);
        good &= std::memcmp(&c.k[l].data()[slot * ks + ch], &want, sizeof want) == 0;
      }
      for (int ch = 0; ch < vs; ++ch) {
        float want = pattern(l, true, p, seq.token_at(p), ch);
        good &= std::memcmp(&c.v[l].data()[slot * vs + ch], &want, sizeof want) == 0;
      }
    }
    ok += good ? 1 : 0;
  }
  return ok;
}

std::vector<int32_t> tokens(int n, int32_t base) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), base);
  return t;
}

Sequence make_seq(int64_t id, std::vector<int32_t> prompt, int max_tokens = 4) {
  Sequence s;
  s.id = id;
  s.request_key = id;
  s.prompt = std::move(prompt);
  s.max_tokens = max_tokens;
  s.ignore_eos = true;
  return s;
}

// One engine process: KV storage, its store tier, its manager.
struct Process {
  model::KvCache cache;
  std::unique_ptr<KvStoreTier> tier;
  std::unique_ptr<KvCacheManager> kv;

  Process(const std::vector<std::string>& dirs, int num_blocks, std::string ns = "test/tiny") {
    for (const std::string& d : dirs) fs::create_directories(d);  // the store wants them to exist
    cache = model::KvCache::allocate(tiny_spec(), num_blocks, kBlockSize);
    KvStoreTierOptions o;
    o.dirs = dirs;
    o.model_namespace = std::move(ns);
    o.host_tier_bytes = size_t{1} << 20;
    o.store_overrides.sweep_interval_s = 0;
    o.store_overrides.direct_io = false;
    auto t = make_kv_store_tier(o, cache);
    if (!t.is_ok()) {
      ADD_FAILURE() << t.status().message();
      std::abort();
    }
    tier = std::move(t).value();
    KvCacheConfig kc;
    kc.num_blocks = num_blocks;
    kc.block_size = kBlockSize;
    kc.cache_namespace = "test/tiny";
    kv = std::make_unique<KvCacheManager>(kc, tier.get());
  }

  // Admits `seq` with prefix lookup and computes the rest of its prompt with fake_forward.
  int admit_and_compute(Sequence& seq) {
    PrefixMatch m = kv->get_computed_blocks(seq);
    const int reuse = m.num_tokens(kBlockSize);
    EXPECT_TRUE(kv->allocate_slots(seq, seq.num_tokens() - reuse, &m).has_value());
    const int computed = seq.num_computed_tokens;
    fake_forward(cache, seq, computed, seq.num_tokens() - computed);
    seq.num_computed_tokens = seq.num_tokens();
    kv->cache_full_blocks(seq);
    return computed;
  }
};

class KvStoreTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("deepinfer_kvtier_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    for (int i = 0; i < 3; ++i) dirs_.push_back((root_ / ("t" + std::to_string(i))).string());
  }
  void TearDown() override { fs::remove_all(root_); }

  // Flips the first payload byte (after the 128-byte header) of every shard file, keeping its
  // mtime (the store's expiry time) so that presence still says "there".
  int corrupt_all_shards() {
    int n = 0;
    for (auto& e : fs::recursive_directory_iterator(root_)) {
      if (!e.is_regular_file() || e.file_size() <= 129) continue;
      const auto mtime = fs::last_write_time(e.path());
      {
        std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
        char c;
        f.seekg(128);
        f.read(&c, 1);
        c ^= 0x5a;
        f.seekp(128);
        f.write(&c, 1);
      }
      fs::last_write_time(e.path(), mtime);
      ++n;
    }
    return n;
  }

  fs::path root_;
  std::vector<std::string> dirs_;
};

TEST_F(KvStoreTierTest, BlocksSurviveARestartBitExact) {
  const std::vector<int32_t> prompt = tokens(14, 7);  // 3 full blocks + 2 tokens
  {
    Process a(dirs_, 8);
    Sequence s = make_seq(1, prompt);
    EXPECT_EQ(a.admit_and_compute(s), 0);
    EXPECT_EQ(a.kv->stats().tier_written_blocks, 3);  // written when cached, not at eviction
    EXPECT_EQ(a.tier->stats().written_blocks, 3);
    a.tier->flush();
    a.kv->free(s);
  }
  Process b(dirs_, 8);
  std::vector<int32_t> longer = prompt;
  longer.insert(longer.end(), {900, 901, 902});
  Sequence s = make_seq(2, longer);
  PrefixMatch m = b.kv->get_computed_blocks(s);
  EXPECT_TRUE(m.blocks.empty());
  EXPECT_EQ(m.num_tier_blocks, 3);
  ASSERT_TRUE(b.kv->allocate_slots(s, s.num_tokens() - 12, &m).has_value());
  EXPECT_EQ(s.num_computed_tokens, 12);
  EXPECT_EQ(count_exact(b.cache, s, 12), 12);
  EXPECT_EQ(b.kv->stats().tier_hit_tokens, 12);
  EXPECT_EQ(b.kv->stats().memory_hit_tokens, 0);
  EXPECT_EQ(b.kv->stats().tier_written_blocks, 0);  // loaded blocks are not written back
  EXPECT_EQ(b.tier->store_stats().ssd_hits, 3u);
  // Now in memory: a second sequence hits RAM, not the store.
  Sequence t = make_seq(3, longer);
  PrefixMatch m2 = b.kv->get_computed_blocks(t);
  EXPECT_EQ(m2.blocks.size(), 3u);
  EXPECT_EQ(m2.num_tier_blocks, 0);
  b.kv->free(s);
}

TEST_F(KvStoreTierTest, OtherNamespaceNeverSeesBlocks) {
  {
    Process a(dirs_, 8);
    Sequence s = make_seq(1, tokens(9, 1));
    a.admit_and_compute(s);
    a.tier->flush();
    a.kv->free(s);
  }
  Process b(dirs_, 8, "test/other-model");
  Sequence s = make_seq(2, tokens(9, 1));
  EXPECT_EQ(b.kv->get_computed_blocks(s).num_tokens(kBlockSize), 0);
}

TEST_F(KvStoreTierTest, CorruptEntryIsAMissNotGarbage) {
  {
    Process a(dirs_, 8);
    Sequence s = make_seq(1, tokens(9, 1));
    a.admit_and_compute(s);
    a.tier->flush();
    a.kv->free(s);
  }
  ASSERT_GT(corrupt_all_shards(), 0);
  Process b(dirs_, 8);
  Sequence s = make_seq(2, tokens(9, 1));
  PrefixMatch m = b.kv->get_computed_blocks(s);  // presence says yes; contents say no
  EXPECT_EQ(m.num_tier_blocks, 2);
  ASSERT_TRUE(b.kv->allocate_slots(s, 9 - m.num_tokens(kBlockSize), &m).has_value());
  EXPECT_EQ(s.num_computed_tokens, 0);
  EXPECT_EQ(b.kv->stats().tier_hit_tokens, 0);
  EXPECT_EQ(b.tier->stats().loaded_blocks, 0);
  b.kv->free(s);
}

TEST_F(KvStoreTierTest, MissingEntryIsAMiss) {
  {
    Process a(dirs_, 8);
    Sequence s = make_seq(1, tokens(9, 1));
    a.admit_and_compute(s);
    a.tier->flush();
    a.kv->free(s);
  }
  fs::remove_all(root_);
  Process b(dirs_, 8);
  Sequence s = make_seq(2, tokens(9, 1));
  PrefixMatch m = b.kv->get_computed_blocks(s);
  EXPECT_EQ(m.num_tier_blocks, 0);
}

// Runs the scheduler to completion with fabricated forward passes; returns prompt tokens computed.
int run_to_completion(Process& p, Scheduler& sched, std::vector<FinishedSeq>* finished) {
  int computed_prompt = 0;
  int32_t next_token = 5000;
  while (sched.has_unfinished()) {
    ScheduleOutput out = sched.schedule();
    if (out.empty()) break;
    StepOutput step;
    for (const ScheduledSeq& ss : out.seqs) {
      const Sequence* seq = sched.get(ss.seq_id);
      fake_forward(p.cache, *seq, ss.first_position, ss.num_new_tokens);
      const int prompt_end = std::min(ss.first_position + ss.num_new_tokens, seq->num_prompt_tokens());
      computed_prompt += std::max(0, prompt_end - ss.first_position);
      if (ss.samples) step.sampled.push_back(next_token++);
    }
    for (FinishedSeq& f : sched.update(out, step)) finished->push_back(std::move(f));
    p.kv->check_invariants(sched.live_sequences());
  }
  return computed_prompt;
}

TEST_F(KvStoreTierTest, SecondProcessComputesOnlyTheSuffix) {
  const std::vector<int32_t> shared = tokens(40, 100);  // 10 full blocks
  {
    Process a(dirs_, 32);
    Scheduler sched(SchedulerConfig{}, *a.kv);
    std::vector<int32_t> p1 = shared;
    p1.insert(p1.end(), {1, 2, 3});
    ASSERT_TRUE(sched.add(make_seq(1, p1)).is_ok());
    std::vector<FinishedSeq> done;
    EXPECT_EQ(run_to_completion(a, sched, &done), 43);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].num_cached_tokens, 0);
    a.tier->flush();
  }
  Process b(dirs_, 32);
  Scheduler sched(SchedulerConfig{}, *b.kv);
  std::vector<int32_t> p2 = shared;
  p2.insert(p2.end(), {7, 8, 9, 10, 11});
  ASSERT_TRUE(sched.add(make_seq(2, p2)).is_ok());
  std::vector<FinishedSeq> done;
  EXPECT_EQ(run_to_completion(b, sched, &done), 5);  // only the suffix went through the "model"
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].num_cached_tokens, 40);  // usage cached_tokens counts the store tier
  EXPECT_EQ(b.kv->stats().tier_hit_tokens, 40);
  EXPECT_EQ(b.tier->stats().loaded_blocks, 10);
  EXPECT_GT(b.kv->stats().tier_written_blocks, 0);  // its own suffix/decode blocks went down
}

}  // namespace
}  // namespace deepinfer::engine
