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

#include "deepinfer/base/fp16.h"
#include "deepinfer/engine/kv_store_tier.h"
#include "deepinfer/engine/scheduler.h"
#include "deepinfer/kvstore/admin.h"

namespace deepinfer::engine {
namespace {

namespace fs = std::filesystem;

constexpr int kBlockSize = 4;

model::KvCacheSpec tiny_spec() { return {/*layers*/ 3, /*kv_heads*/ 2, /*k dim*/ 4, /*v dim*/ 3}; }

size_t f32_block_bytes() { return model::KvCache::bytes_per_block(tiny_spec(), kBlockSize); }

// KV "computed" for token `tok` at `pos`: depends on the whole identity, so a wrong block,
// layer, position or K/V swap shows.
float pattern(int layer, bool is_v, int pos, int32_t tok, int channel) {
  return static_cast<float>(tok) * 0.5f + pos * 1000.0f + layer * 100000.0f + (is_v ? 0.25f : 0) +
         channel * 0.001f;
}

// The pattern as the cache stores it (rounded to nearest even for f16/bf16), as raw bits.
uint32_t stored_bits(float x, DType t) {
  if (t == DType::kBF16) return f32_to_bf16(x);
  if (t == DType::kF16) return f32_to_f16(x);
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

void put(std::byte* pool, int64_t i, DType t, float x) {
  const uint32_t bits = stored_bits(x, t);
  if (t == DType::kF32) std::memcpy(pool + i * 4, &bits, 4);
  else std::memcpy(pool + i * 2, &bits, 2);  // little-endian: the low half
}

uint32_t get(const std::byte* pool, int64_t i, DType t) {
  uint32_t bits = 0;
  std::memcpy(&bits, pool + i * (t == DType::kF32 ? 4 : 2), t == DType::kF32 ? 4 : 2);
  return bits;
}

// Fabricated forward pass: writes the pattern for tokens [first, first + n) of `seq`.
void fake_forward(model::KvCache& c, const Sequence& seq, int first, int n) {
  const int64_t ks = c.k_token_stride(), vs = c.v_token_stride();
  for (int p = first; p < first + n; ++p) {
    const int64_t slot = int64_t{seq.block_table[p / c.block_size]} * c.block_size + p % c.block_size;
    for (int l = 0; l < c.spec.num_layers; ++l) {
      for (int ch = 0; ch < ks; ++ch)
        put(c.k[l].data(), slot * ks + ch, c.dtype(), pattern(l, false, p, seq.token_at(p), ch));
      for (int ch = 0; ch < vs; ++ch)
        put(c.v[l].data(), slot * vs + ch, c.dtype(), pattern(l, true, p, seq.token_at(p), ch));
    }
  }
}

// Counts tokens [0, n) of `seq` whose KV in `c` is bit-exact the (stored) pattern.
int count_exact(const model::KvCache& c, const Sequence& seq, int n) {
  const int64_t ks = c.k_token_stride(), vs = c.v_token_stride();
  int ok = 0;
  for (int p = 0; p < n; ++p) {
    const int64_t slot = int64_t{seq.block_table[p / c.block_size]} * c.block_size + p % c.block_size;
    bool good = true;
    for (int l = 0; l < c.spec.num_layers; ++l) {
      for (int ch = 0; ch < ks; ++ch)
        good &= get(c.k[l].data(), slot * ks + ch, c.dtype()) ==
                stored_bits(pattern(l, false, p, seq.token_at(p), ch), c.dtype());
      for (int ch = 0; ch < vs; ++ch)
        good &= get(c.v[l].data(), slot * vs + ch, c.dtype()) ==
                stored_bits(pattern(l, true, p, seq.token_at(p), ch), c.dtype());
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

  Process(const std::vector<std::string>& dirs, int num_blocks, std::string ns = "test/tiny",
          DType dtype = DType::kF32) {
    for (const std::string& d : dirs) fs::create_directories(d);  // the store wants them to exist
    model::KvCacheSpec spec = tiny_spec();
    spec.dtype = dtype;
    cache = model::KvCache::allocate(spec, num_blocks, kBlockSize);
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

// A 16-bit cache's blocks come back bit-exact to a 16-bit cache of the same dtype, and are
// never served to an f32 cache or one of the other 16-bit dtype (the namespace holds the dtype).
TEST_F(KvStoreTierTest, SixteenBitBlocksRoundTripAndNeverCrossDtypes) {
  const std::vector<int32_t> prompt = tokens(14, 7);  // 3 full blocks
  {
    Process a(dirs_, 8, "test/tiny", DType::kBF16);
    EXPECT_EQ(a.cache.bytes_per_block(), f32_block_bytes() / 2);
    Sequence s = make_seq(1, prompt);
    a.admit_and_compute(s);
    a.tier->flush();
    a.kv->free(s);
  }
  for (DType other : {DType::kF32, DType::kF16}) {
    Process b(dirs_, 8, "test/tiny", other);
    Sequence s = make_seq(2, prompt);
    EXPECT_EQ(b.kv->get_computed_blocks(s).num_tokens(kBlockSize), 0) << dtype_name(other);
  }
  Process c(dirs_, 8, "test/tiny", DType::kBF16);
  Sequence s = make_seq(3, prompt);
  PrefixMatch m = c.kv->get_computed_blocks(s);
  EXPECT_EQ(m.num_tier_blocks, 3);
  ASSERT_TRUE(c.kv->allocate_slots(s, s.num_tokens() - 12, &m).has_value());
  EXPECT_EQ(s.num_computed_tokens, 12);
  EXPECT_EQ(count_exact(c.cache, s, 12), 12);
  c.kv->free(s);
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
    if (out.empty() && sched.num_prefetching() > 0) {
      p.tier->wait_for_prefetch(std::chrono::milliseconds(50));
      continue;
    }
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
  // The prefix was read in the background while waiting; admission copied it from RAM.
  EXPECT_EQ(b.tier->stats().prefetches, 1);
  EXPECT_EQ(b.tier->stats().prefetched_blocks, 10);
  EXPECT_EQ(b.tier->store_stats().ssd_hits, 10u);  // each block read from the SSD once
  EXPECT_GE(b.tier->store_stats().host_hits, 10u);
}

TEST_F(KvStoreTierTest, TrafficClassComesFromTheSequence) {
  Process a(dirs_, 16);
  Sequence agent = make_seq(1, tokens(9, 1));  // 2 full blocks
  agent.traffic_class = kvstore::TrafficClass::kAgent;
  Sequence chat = make_seq(2, tokens(13, 500));  // 3 full blocks
  a.admit_and_compute(agent);
  a.admit_and_compute(chat);
  a.tier->flush();
  auto st = kvstore::stat_store(dirs_);
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  EXPECT_EQ(st->entries_by_class[static_cast<int>(kvstore::TrafficClass::kAgent)], 2u);
  EXPECT_EQ(st->entries_by_class[static_cast<int>(kvstore::TrafficClass::kChat)], 3u);
  a.kv->free(agent);
  a.kv->free(chat);
}

TEST_F(KvStoreTierTest, ResetPrefixCacheLeavesTheStore) {
  Process a(dirs_, 16);
  Sequence s = make_seq(1, tokens(13, 1));
  a.admit_and_compute(s);
  a.tier->flush();
  EXPECT_EQ(a.kv->reset_prefix_cache(), 0);  // all 3 cached blocks are in use
  a.kv->free(s);
  EXPECT_EQ(a.kv->reset_prefix_cache(), 3);
  EXPECT_EQ(a.kv->num_cached_blocks(), 0);
  EXPECT_EQ(a.kv->num_available_blocks(), 16);
  Sequence t = make_seq(2, tokens(13, 1));
  PrefixMatch m = a.kv->get_computed_blocks(t);
  EXPECT_TRUE(m.blocks.empty());
  EXPECT_EQ(m.num_tier_blocks, 3);  // the store (here its RAM tier) still has them
}

// A tier whose background reads finish only when the test says so.
class GatedTier : public KvTierHook {
 public:
  int lookup_prefix(Sequence&, int, int count) override {
    ++lookups;
    return offer ? count : 0;
  }
  int load_blocks(Sequence&, int, std::span<const int32_t>) override { return 0; }
  bool start_prefetch(Sequence& seq, int first, int count) override {
    started.push_back({seq.id, first, count});
    return false;
  }
  bool prefetch_done(Sequence& seq) override {
    if (give_up_on == seq.id) {
      seq.skip_tier = true;
      return true;
    }
    return open_for == seq.id;
  }
  void on_sequence_released(const Sequence& seq) override { released.push_back(seq.id); }
  struct Start {
    int64_t seq;
    int first, count;
  };
  std::vector<Start> started;
  std::vector<int64_t> released;
  int64_t open_for = -1;
  int64_t give_up_on = -1;
  bool offer = false;
  int lookups = 0;
};

KvCacheConfig gated_config() {
  KvCacheConfig kc;
  kc.num_blocks = 32;
  kc.block_size = kBlockSize;
  kc.cache_namespace = "test/tiny";
  return kc;
}

TEST(KvTierPrefetch, OthersRunWhileAPrefixIsBeingRead) {
  GatedTier tier;
  KvCacheManager kv(gated_config(), &tier);
  Scheduler sched(SchedulerConfig{}, kv);
  ASSERT_TRUE(sched.add(make_seq(1, tokens(18, 1))).is_ok());   // 4 full blocks to read
  ASSERT_TRUE(sched.add(make_seq(2, tokens(6, 900))).is_ok());  // 1 full block
  ScheduleOutput out = sched.schedule();
  // Both reads start on the first step; neither may be admitted before its read is done.
  ASSERT_EQ(tier.started.size(), 2u);
  EXPECT_EQ(tier.started[0].seq, 1);
  EXPECT_EQ(tier.started[0].first, 0);
  EXPECT_EQ(tier.started[0].count, 4);  // (18 - 1) / 4: the last token is always computed
  EXPECT_EQ(tier.started[1].count, 1);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(sched.num_prefetching(), 2);
  // The second request's read finishes first: it runs, the first still waits.
  tier.open_for = 2;
  out = sched.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].seq_id, 2);
  EXPECT_EQ(sched.num_prefetching(), 1);
  EXPECT_EQ(tier.started.size(), 2u);  // nothing started twice
  tier.open_for = 1;
  sched.update(out, StepOutput{{5000}, {}});
  out = sched.schedule();
  bool has1 = false;
  for (const auto& s : out.seqs) has1 |= s.seq_id == 1;
  EXPECT_TRUE(has1);
  EXPECT_EQ(sched.num_prefetching(), 0);
  // Aborting tells the tier to forget the sequence.
  (void)sched.abort(1);
  EXPECT_NE(std::find(tier.released.begin(), tier.released.end(), 1), tier.released.end());
}

TEST(KvTierPrefetch, ASequenceWhoseReadWasGivenUpOnComputesItsPrefix) {
  GatedTier tier;
  tier.offer = true;  // the tier claims every block, but its read never finishes
  KvCacheManager kv(gated_config(), &tier);
  Scheduler sched(SchedulerConfig{}, kv);
  ASSERT_TRUE(sched.add(make_seq(1, tokens(18, 1))).is_ok());
  EXPECT_TRUE(sched.schedule().empty());
  tier.give_up_on = 1;  // e.g. a storage target stopped answering
  ScheduleOutput out = sched.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].first_position, 0);  // nothing taken from the tier
  EXPECT_EQ(out.seqs[0].num_new_tokens, 18);
  EXPECT_EQ(tier.lookups, 0);
  EXPECT_TRUE(sched.get(1)->skip_tier);
}

TEST(KvTierPrefetch, NothingToReadWhenThePrefixIsInMemory) {
  GatedTier tier;
  KvCacheManager kv(gated_config(), &tier);
  Sequence a = make_seq(1, tokens(9, 1));
  ASSERT_TRUE(kv.allocate_slots(a, 9).has_value());
  a.num_computed_tokens = 9;
  kv.cache_full_blocks(a);
  Sequence b = make_seq(2, tokens(9, 1));  // same 2 full blocks, both in memory
  EXPECT_TRUE(kv.prefetch_ready(b));
  EXPECT_TRUE(tier.started.empty());
  Sequence c = make_seq(3, tokens(13, 1));  // 3 full blocks: only the third is not in memory
  EXPECT_FALSE(kv.prefetch_ready(c));
  ASSERT_EQ(tier.started.size(), 1u);
  EXPECT_EQ(tier.started[0].first, 2);
  EXPECT_EQ(tier.started[0].count, 1);
  kv.free(a);
}

}  // namespace
}  // namespace deepinfer::engine
