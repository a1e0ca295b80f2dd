// Prefill/decode disaggregation without the network: a "prefill" engine exports a prompt's
// blocks (KvExportSink), a "decode" engine imports them (KvStoreTier::import_block) and must
// then produce the same tokens and logprobs as an engine that computed everything, computing
// only the prompt's last partial block. Plus the internal protocol's codec.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "../runner/tiny_llama_fixture.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/kv_store_tier.h"
#include "deepinfer/kvstore/admin.h"
#include "deepinfer/serve/pd_protocol.h"

namespace deepinfer::serve {
namespace {

struct CapturedBlock {
  int index;
  std::array<uint8_t, 32> key;
  std::vector<uint8_t> bytes;
  kvstore::EntryKind kind = kvstore::EntryKind::kKvBlock;
};

// Captures what an engine exports. Layer messages go through the wire codec and are put back
// together into whole blocks, as the decode role does.
class CapturingSink : public engine::KvExportSink {
 public:
  void export_block(const std::string& tag, int index, const std::array<uint8_t, 32>& key,
                    std::span<const uint8_t> bytes, kvstore::EntryKind kind) override {
    blocks[tag].push_back({index, key, {bytes.begin(), bytes.end()}, kind});
  }
  void export_layer(const std::string& tag, int layer, int num_layers, std::span<const std::array<uint8_t, 32>> keys,
                    std::span<const uint8_t> bytes) override {
    const auto msg = pd::encode_kv_layer(layer, num_layers, keys, bytes);
    auto m = pd::decode_kv_layer(msg);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    ASSERT_EQ(m->layer, layer);
    ASSERT_EQ(layer, layers_seen[tag]) << "layers out of order";
    layers_seen[tag] += 1;
    const size_t n = m->keys.size(), slice = m->slices.size() / n;
    auto& out = blocks[tag];
    if (layer == 0) {
      out.clear();
      for (size_t i = 0; i < n; ++i) out.push_back({int(i), m->keys[i], std::vector<uint8_t>(slice * num_layers)});
    }
    ASSERT_EQ(out.size(), n);
    for (size_t i = 0; i < n; ++i)
      std::copy_n(m->slices.begin() + std::ptrdiff_t(i * slice), slice, out[i].bytes.begin() + std::ptrdiff_t(layer * slice));
  }
  void export_done(const std::string& tag, int n) override { done[tag] = n; }
  std::map<std::string, std::vector<CapturedBlock>> blocks;
  std::map<std::string, int> layers_seen;
  std::map<std::string, int> done;
};

std::unique_ptr<engine::Engine> make_engine(bool ram_tier) {
  engine::EngineConfig c;
  c.num_threads = 1;
  c.batch_invariant = true;
  c.kv_cache_bytes = size_t{16} << 20;
  c.kv_store_ram_only = ram_tier;
  c.kv_store_namespace = "tiny_llama|weights=test";
  auto e = engine::Engine::create(runnertest::open_model(), runnertest::byte_tokenizer(), c);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return std::move(e).value();
}

std::vector<engine::RequestOutput> run(engine::Engine& e, const engine::GenerationRequest& r) {
  auto id = e.add_request(r);
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  std::vector<engine::RequestOutput> outs;
  while (e.has_unfinished())
    for (auto& o : e.step()) outs.push_back(std::move(o));
  return outs;
}

engine::GenerationRequest request_of(int prompt_len) {
  engine::GenerationRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(3 + (i * 37) % 250);
  r.max_tokens = 12;
  r.sampling.temperature = 0;
  r.sampling.logprobs = 3;
  return r;
}

std::vector<int32_t> tokens_of(const std::vector<engine::RequestOutput>& outs) {
  std::vector<int32_t> t;
  for (const auto& o : outs) t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  return t;
}

std::vector<float> logprobs_of(const std::vector<engine::RequestOutput>& outs) {
  std::vector<float> v;
  for (const auto& o : outs)
    for (const auto& e : o.new_logprobs) {
      v.push_back(e.logprob);
      for (const auto& [id, lp] : e.top) v.push_back(lp + float(id));
    }
  return v;
}

// Both ways out of a prefill engine: layer by layer during the forward, whole blocks at the end.
class PdHandoffBothWays : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(ByLayerOrByBlock, PdHandoffBothWays, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "ByLayer" : "ByBlock"; });

TEST_P(PdHandoffBothWays, ImportedBlocksGiveTheSameTokensAndLogprobsAsComputingThePrompt) {
  const bool by_layer = GetParam();
  for (int prompt_len : {5, 16, 47, 64, 100}) {
    SCOPED_TRACE(prompt_len);
    auto reference = make_engine(false);
    const auto want = run(*reference, request_of(prompt_len));

    auto prefill = make_engine(true);
    CapturingSink sink;
    ASSERT_TRUE(prefill->set_kv_export_sink(&sink, by_layer).is_ok());
    engine::GenerationRequest pre = request_of(prompt_len);
    pre.max_tokens = 1;
    pre.kv_export_tag = "7@peer";
    run(*prefill, pre);
    ASSERT_EQ(sink.done.count("7@peer"), 1u);
    const int bs = 16;
    EXPECT_EQ(sink.done["7@peer"], prompt_len / bs);
    ASSERT_EQ(sink.blocks["7@peer"].size(), size_t(prompt_len / bs));
    // By layer: every layer went out, in order, once; by block: none did.
    EXPECT_EQ(sink.layers_seen["7@peer"], by_layer && prompt_len >= bs ? prefill->model_config().num_layers : 0);

    auto decode = make_engine(true);
    for (const auto& b : sink.blocks["7@peer"]) {
      // Through the wire format, as the decode role receives it.
      const auto msg = pd::encode_kv_block(b.index, b.key, b.bytes);
      auto parsed = pd::decode_kv_block(msg);
      ASSERT_TRUE(parsed.is_ok());
      ASSERT_TRUE(decode->kv_import_tier()->import_block(parsed->key, parsed->bytes));
    }
    const auto got = run(*decode, request_of(prompt_len));
    EXPECT_EQ(tokens_of(got), tokens_of(want));
    EXPECT_EQ(logprobs_of(got), logprobs_of(want));  // bit for bit (batch-invariant engines)
    // The decode engine computed only what the blocks did not cover (at least one token).
    const int full = (prompt_len / bs) * bs;
    EXPECT_EQ(got.back().cached_tokens, full == prompt_len ? full - bs : full);
  }
}

TEST(PdHandoff, BlocksFromAnotherNamespaceAreNeverUsed) {
  auto prefill = make_engine(true);
  CapturingSink sink;
  ASSERT_TRUE(prefill->set_kv_export_sink(&sink).is_ok());
  engine::GenerationRequest pre = request_of(64);
  pre.max_tokens = 1;
  pre.kv_export_tag = "1@p";
  run(*prefill, pre);
  engine::EngineConfig c;
  c.num_threads = 1;
  c.kv_cache_bytes = size_t{16} << 20;
  c.kv_store_ram_only = true;
  c.kv_store_namespace = "tiny_llama|weights=OTHER";
  auto decode = engine::Engine::create(runnertest::open_model(), runnertest::byte_tokenizer(), c);
  ASSERT_TRUE(decode.is_ok());
  for (const auto& b : sink.blocks["1@p"]) ASSERT_TRUE((*decode)->kv_import_tier()->import_block(b.key, b.bytes));
  const auto got = run(**decode, request_of(64));
  EXPECT_EQ(got.back().cached_tokens, 0);
}

TEST(PdHandoff, AnExportTagWithoutATierIsRefusedAndAnAbortedPromptExportsNothing) {
  auto plain = make_engine(false);
  CapturingSink sink;
  EXPECT_FALSE(plain->set_kv_export_sink(&sink).is_ok());

  auto prefill = make_engine(true);
  ASSERT_TRUE(prefill->set_kv_export_sink(&sink).is_ok());
  engine::GenerationRequest pre = request_of(100);
  pre.max_tokens = 1;
  pre.kv_export_tag = "9@p";
  auto id = prefill->add_request(pre);
  ASSERT_TRUE(id.is_ok());
  prefill->abort(*id);
  EXPECT_EQ(sink.done.count("9@p"), 1u);
  EXPECT_EQ(sink.done["9@p"], 0);
  EXPECT_TRUE(sink.blocks["9@p"].empty());
  // A block of the wrong size is refused.
  std::array<uint8_t, 32> key{};
  std::vector<uint8_t> short_block(10);
  EXPECT_FALSE(prefill->kv_import_tier()->import_block(key, short_block));
}

TEST(PdProtocol, RequestsAndOutputsRoundTrip) {
  engine::GenerationRequest r;
  r.prompt_ids = {1, 2, 3};
  r.sampling.temperature = 0.7f;
  r.sampling.top_p = 0.9f;
  r.sampling.top_k = 5;
  r.sampling.min_p = 0.1f;
  r.sampling.repetition_penalty = 1.1f;
  r.sampling.frequency_penalty = 0.2f;
  r.sampling.presence_penalty = 0.3f;
  r.sampling.seed = 0xFFFFFFFFFFFFFFFFull;
  r.sampling.has_seed = true;
  r.sampling.logprobs = 4;
  r.sampling.logit_bias = {{7, -100.0f}, {9, 2.5f}};
  r.max_tokens = 77;
  r.stop = {"\n\n", "END"};
  r.ignore_eos = true;
  r.grammar = structured::GrammarSpec{structured::GrammarSpec::kJsonSchema, R"({"type":"object"})", {}};
  r.grammar->opts.any_order_keys = true;
  r.traffic_class = kvstore::TrafficClass::kAgent;
  r.prompt_logprobs = 2;
  r.swa_restore = engine::SwaRestore::kExact;
  r.speculative = false;
  engine::PromptImage img;
  img.start = 1;
  img.length = 2;
  img.hash = {0xFFFFFFFFFFFFFFFFull, 42};
  img.embeddings = std::make_shared<const std::vector<float>>(std::vector<float>{1.5f, -0.0f, 3e-38f, 7.25f, -1e9f});
  r.images.push_back(img);
  auto back = pd::request_from_json(nlohmann::json::parse(pd::request_to_json(r).dump()));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->prompt_ids, r.prompt_ids);
  EXPECT_EQ(back->sampling.seed, r.sampling.seed);
  EXPECT_EQ(back->sampling.logit_bias, r.sampling.logit_bias);
  EXPECT_FLOAT_EQ(back->sampling.min_p, 0.1f);
  EXPECT_EQ(back->stop, r.stop);
  ASSERT_TRUE(back->grammar.has_value());
  EXPECT_EQ(back->grammar->source, r.grammar->source);
  EXPECT_TRUE(back->grammar->opts.any_order_keys);
  EXPECT_EQ(back->traffic_class, r.traffic_class);
  EXPECT_EQ(back->swa_restore, r.swa_restore);
  EXPECT_EQ(back->prompt_logprobs, 2);
  EXPECT_FALSE(back->speculative);
  EXPECT_TRUE(back->ignore_eos);
  ASSERT_EQ(back->images.size(), 1u);  // the image's span, hash and embeddings, bit for bit
  EXPECT_EQ(back->images[0].start, 1);
  EXPECT_EQ(back->images[0].length, 2);
  EXPECT_EQ(back->images[0].hash, img.hash);
  ASSERT_EQ(back->images[0].embeddings->size(), img.embeddings->size());
  EXPECT_EQ(std::memcmp(back->images[0].embeddings->data(), img.embeddings->data(), 5 * sizeof(float)), 0);
  EXPECT_EQ(pd::request_to_json(*back), pd::request_to_json(r));

  engine::RequestOutput o;
  o.new_token_ids = {5, 6};
  o.new_text = "h\xc3\xa9";
  o.new_logprobs = {{5, -0.5f, {{5, -0.5f}, {8, -1.25f}}}};
  o.finished = true;
  o.finish_reason = engine::FinishReason::kGrammarDeadEnd;
  o.error = "dead end";
  o.prompt_tokens = 3;
  o.completion_tokens = 2;
  o.cached_tokens = 1;
  auto ob = pd::output_from_json(nlohmann::json::parse(pd::output_to_json(o).dump()));
  ASSERT_TRUE(ob.is_ok());
  EXPECT_EQ(pd::output_to_json(*ob), pd::output_to_json(o));
}

TEST(PdProtocol, MalformedInputIsAnErrorNamingIt) {
  auto r = pd::request_from_json(nlohmann::json{{"prompt_ids", "x"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("internal request"), std::string::npos);
  auto o = pd::output_from_json(nlohmann::json::object());
  EXPECT_FALSE(o.is_ok());
  std::array<uint8_t, 32> key{};
  std::vector<uint8_t> payload = {1, 2, 3};
  auto msg = pd::encode_kv_block(4, key, payload);
  EXPECT_TRUE(pd::decode_kv_block(msg).is_ok());
  EXPECT_FALSE(pd::decode_kv_block(std::span(msg).first(10)).is_ok());
  msg[0] ^= 0xff;
  auto bad = pd::decode_kv_block(msg);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("magic"), std::string::npos);
}

TEST(PdProtocol, BlockMessagesCarryTheirEntryKind) {
  std::array<uint8_t, 32> key{};
  key.fill(9);
  const std::vector<uint8_t> payload = {5, 6, 7, 8};
  auto msg = pd::encode_kv_block(3, key, payload, kvstore::EntryKind::kSwaCheckpoint);
  auto m = pd::decode_kv_block(msg);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->index, 3);
  EXPECT_EQ(m->key, key);
  EXPECT_EQ(m->kind, kvstore::EntryKind::kSwaCheckpoint);
  EXPECT_TRUE(std::equal(m->bytes.begin(), m->bytes.end(), payload.begin(), payload.end()));
  EXPECT_EQ(pd::decode_kv_block(pd::encode_kv_block(0, key, payload))->kind, kvstore::EntryKind::kKvBlock);
  msg[44] = 7;  // the kind field: no such kind
  auto bad = pd::decode_kv_block(msg);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("entry kind 7"), std::string::npos) << bad.status().message();
}

// A decode engine with SSD targets keeps an imported checkpoint part as one: counted apart by
// `kvstore stat` (and queued under the checkpoint write policy), not as a KV block.
TEST(PdHandoff, ImportedCheckpointPartsAreStoredAsSuch) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("pd_import_kind_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    engine::EngineConfig c;
    c.num_threads = 1;
    c.kv_cache_bytes = size_t{16} << 20;
    c.kv_store_dirs = {dir.string()};
    c.kv_store_namespace = "tiny_llama|weights=test";
    auto e = engine::Engine::create(runnertest::open_model(), runnertest::byte_tokenizer(), c);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    engine::KvStoreTier* tier = (*e)->kv_import_tier();
    ASSERT_NE(tier, nullptr);
    std::vector<uint8_t> bytes(tier->block_bytes(), 3);
    std::array<uint8_t, 32> block_key{}, part_key{};
    block_key.fill(1);
    part_key.fill(2);
    ASSERT_TRUE(tier->import_block(block_key, bytes, kvstore::EntryKind::kKvBlock));
    ASSERT_TRUE(tier->import_block(part_key, bytes, kvstore::EntryKind::kSwaCheckpoint));
    tier->flush();
  }
  auto st = kvstore::stat_store({dir.string()});
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  EXPECT_EQ(st->entries, 2u);
  EXPECT_EQ(st->entries_by_kind[int(kvstore::EntryKind::kKvBlock)], 1u);
  EXPECT_EQ(st->entries_by_kind[int(kvstore::EntryKind::kSwaCheckpoint)], 1u);
  fs::remove_all(dir);
}

TEST(PdProtocol, LayerMessagesRoundTripAndBadOnesAreNamed) {
  std::vector<std::array<uint8_t, 32>> keys(3);
  for (size_t i = 0; i < keys.size(); ++i) keys[i].fill(uint8_t(i + 1));
  std::vector<uint8_t> slices(3 * 40);
  for (size_t i = 0; i < slices.size(); ++i) slices[i] = uint8_t(i * 7);
  const auto msg = pd::encode_kv_layer(4, 30, keys, slices);
  EXPECT_TRUE(pd::is_kv_layer_message(msg));
  auto m = pd::decode_kv_layer(msg);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->layer, 4);
  EXPECT_EQ(m->num_layers, 30);
  EXPECT_EQ(m->keys, keys);
  EXPECT_TRUE(std::equal(m->slices.begin(), m->slices.end(), slices.begin(), slices.end()));
  // A whole-block message is not a layer message; truncations and bad headers are errors.
  std::array<uint8_t, 32> key{};
  EXPECT_FALSE(pd::is_kv_layer_message(pd::encode_kv_block(0, key, slices)));
  for (size_t cut : {size_t(3), size_t(19), size_t(20 + 32 * 3 - 1), msg.size() - 1}) {
    auto bad = pd::decode_kv_layer(std::span(msg).first(cut));
    EXPECT_FALSE(bad.is_ok()) << cut;
  }
  EXPECT_FALSE(pd::decode_kv_layer(pd::encode_kv_layer(30, 30, keys, slices)).is_ok());  // layer >= layers
  EXPECT_FALSE(pd::decode_kv_layer(pd::encode_kv_layer(0, 30, {}, {})).is_ok());          // no blocks
}

}  // namespace
}  // namespace deepinfer::serve
