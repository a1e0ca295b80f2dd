// Broken or unsupported DeepSeek-V4 directories fail with one Status naming the file and the
// tensor or field, never a crash: a missing tensor, a wrong shape, an unknown quantisation or
// expert type, a field of the wrong type, a DeepSeek-V4.1 config, a wrong KV cache.
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "v4_fixture.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

// A copy of the h2_mixed fixture whose config.json is edited by `edit`.
template <typename F>
std::string broken_copy(const std::string& tag, F edit) {
  const fs::path dir =
      fs::temp_directory_path() / ("deepinfer_v4_broken_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string src = v4test::fixture_dir("h2_mixed");
  fs::copy_file(src + "/model.safetensors", dir / "model.safetensors");
  std::ifstream in(src + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  edit(cfg);
  std::ofstream(dir / "config.json") << cfg.dump(2);
  return dir.string();
}

template <typename F>
std::string load_error(const std::string& tag, F edit) {
  const std::string dir = broken_copy(tag, edit);
  auto m = v4test::open_dir(dir);
  fs::remove_all(dir);
  EXPECT_FALSE(m.is_ok()) << tag;
  if (m.is_ok()) return "";
  EXPECT_EQ(m.status().message().find('\n'), std::string::npos)
      << "one line: " << m.status().message();
  EXPECT_NE(m.status().message().find(dir), std::string::npos)
      << "names the checkpoint: " << m.status().message();
  return m.status().message();
}

// A copy of fixture `name` with `bytes` written over the start of tensor `tensor`'s data.
std::string patched_copy(const std::string& name, const std::string& tensor,
                         const std::string& bytes) {
  const fs::path dir = fs::temp_directory_path() /
                       ("deepinfer_v4_patched_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string src = v4test::fixture_dir(name);
  fs::copy_file(src + "/config.json", dir / "config.json");
  std::ifstream in(src + "/model.safetensors", std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  std::memcpy(&n, data.data(), 8);
  const auto header = nlohmann::json::parse(data.substr(8, n));
  const uint64_t at = 8 + n + header.at(tensor).at("data_offsets")[0].get<uint64_t>();
  data.replace(at, bytes.size(), bytes);
  std::ofstream(dir / "model.safetensors", std::ios::binary) << data;
  return dir.string();
}

std::string patched_error(const std::string& name, const std::string& tensor,
                          const std::string& bytes) {
  const std::string dir = patched_copy(name, tensor, bytes);
  auto m = v4test::open_dir(dir);
  fs::remove_all(dir);
  EXPECT_FALSE(m.is_ok()) << tensor;
  return m.is_ok() ? "" : m.status().message();
}

TEST(DeepseekV4Errors, HashTableNamingAMissingExpertIsRefused) {
  const int64_t expert = 99;  // the fixture has 4 experts
  const std::string msg = patched_error("h2_mixed", "model.layers.0.ffn.gate.tid2eid",
                                        std::string(reinterpret_cast<const char*>(&expert), 8));
  EXPECT_NE(msg.find("layers.0.ffn.gate.tid2eid"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expert 99"), std::string::npos) << msg;
}

TEST(DeepseekV4Errors, NanBlockScaleIsRefused) {
  const std::string msg =
      patched_error("fp8_ue8m0", "layers.0.attn.wq_a.scale", std::string(1, '\xff'));
  EXPECT_NE(msg.find("layers.0.attn.wq_a.scale"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN"), std::string::npos) << msg;
}

TEST(DeepseekV4Errors, MissingTensorNamesIt) {
  // Layer 0 turned into a CSA layer: its compressor is not in the checkpoint.
  const std::string msg = load_error(
      "missing", [](nlohmann::json& c) { c["layer_types"][0] = "compressed_sparse_attention"; });
  EXPECT_NE(msg.find("missing tensor 'layers.0.attn.compressor.wkv.weight'"), std::string::npos)
      << msg;
}

TEST(DeepseekV4Errors, ShapeMismatchNamesTheTensor) {
  const std::string msg = load_error("shape", [](nlohmann::json& c) { c["q_lora_rank"] = 24; });
  EXPECT_NE(msg.find("layers.0.attn.wq_a.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[24, 32]"), std::string::npos) << msg;
}

TEST(DeepseekV4Errors, UnknownQuantizationIsRefused) {
  const std::string msg = load_error("awq", [](nlohmann::json& c) {
    c["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
  });
  EXPECT_NE(msg.find("quantization_config"), std::string::npos) << msg;
  EXPECT_NE(msg.find("awq"), std::string::npos) << msg;
}

// FP4 experts load (deepseek_v4_fp4_test.cc); a config declaring them over bf16 experts is
// refused naming the first expert tensor, and an unknown expert type naming the field.
TEST(DeepseekV4Errors, Fp4ConfigOverBf16ExpertsIsRefused) {
  const std::string msg = load_error("fp4", [](nlohmann::json& c) {
    c["quantization_config"] = {
        {"quant_method", "fp8"}, {"weight_block_size", {128, 128}}, {"expert_dtype", "fp4"}};
  });
  EXPECT_NE(msg.find("'layers.0.ffn.experts.0.w1.weight' has type bf16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expert_dtype fp4"), std::string::npos) << msg;
}

TEST(DeepseekV4Errors, UnknownExpertDtypeIsRefused) {
  const std::string msg = load_error("int4", [](nlohmann::json& c) { c["expert_dtype"] = "int4"; });
  EXPECT_NE(msg.find("expert_dtype 'int4'"), std::string::npos) << msg;
  const std::string bad = load_error("int4b", [](nlohmann::json& c) { c["expert_dtype"] = 4; });
  EXPECT_NE(bad.find("expert_dtype must be a string"), std::string::npos) << bad;
}

TEST(DeepseekV4Errors, WrongTypeNamesTheField) {
  const std::string msg = load_error("type", [](nlohmann::json& c) { c["hc_mult"] = "four"; });
  EXPECT_NE(msg.find("'hc_mult'"), std::string::npos) << msg;
}

TEST(DeepseekV4Errors, UnknownLayerTypeNamesTheField) {
  const std::string msg =
      load_error("layer_type", [](nlohmann::json& c) { c["layer_types"][1] = "engram"; });
  EXPECT_NE(msg.find("layer_types[1]"), std::string::npos) << msg;
}

TEST(DeepseekV4Errors, DeepseekV41ConfigIsRefused) {
  // V4.1 nests its text model under text_config (no top-level sizes).
  const std::string msg = load_error("v41", [](nlohmann::json& c) {
    nlohmann::json text = c;
    c = {{"model_type", "deepseek_v41"}, {"text_config", text}};
  });
  EXPECT_NE(msg.find("deepseek_v41"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model_type"), std::string::npos) << msg;
}

TEST(DeepseekV4Errors, WrongCacheShapeIsAnError) {
  auto m = v4test::open_fixture("h2_mixed");
  ASSERT_NE(m, nullptr);
  model::KvCacheSpec spec{4, 1, 16, 0};  // a plain K/V cache, not V4's state kinds
  model::KvCache cache = model::KvCache::allocate(spec, 2, 8);
  ForwardBatch b;
  v4test::PagedSeq s{{5, 6, 7}, {0}, 0};
  v4test::add_step(b, s, 3, 8);
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  std::vector<float> logits(3 * 128);
  Status st = m->forward(b, cache, ctx, logits.data());
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("deepseek_v4's state"), std::string::npos) << st.message();
}

// A block the step reads whose recent rows are gone (slab -1) is an error, not garbage.
TEST(DeepseekV4Errors, MissingRecentRowsAreAnError) {
  auto m = v4test::open_fixture("h2_mixed");
  ASSERT_NE(m, nullptr);
  const int bs = v4test::block_size_of(*m);
  model::KvCache cache = model::KvCache::allocate(m->kv_cache_spec(), 4, bs, 4);
  std::vector<int32_t> ids(2 * bs + 1, 5);
  v4test::PagedSeq s{ids, {0, 1, 2}, 0};
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  ForwardBatch b1;
  v4test::add_step(b1, s, 2 * bs, bs);
  std::vector<float> logits(3 * bs * 128);
  ASSERT_TRUE(m->forward(b1, cache, ctx, logits.data()).is_ok());
  ForwardBatch b2;
  v4test::add_step(b2, s, 1, bs);
  b2.recent_slab_table[1] = -1;  // the window of the new token reaches into block 1
  Status st = m->forward(b2, cache, ctx, logits.data());
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("no recent rows"), std::string::npos) << st.message();
}

TEST(DeepseekV4Errors, NewTokensMustContinueTheCache) {
  auto m = v4test::open_fixture("h2_mixed");
  ASSERT_NE(m, nullptr);
  model::KvCache cache = model::KvCache::allocate(m->kv_cache_spec(), 4, 8, 4);
  ForwardBatch b;
  v4test::PagedSeq s{{5, 6, 7, 8, 9}, {0, 1}, 0};
  v4test::add_step(b, s, 5, 8);
  b.positions[4] = 7;  // a gap: position 4 never computed
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  std::vector<float> logits(5 * 128);
  Status st = m->forward(b, cache, ctx, logits.data());
  EXPECT_FALSE(st.is_ok());
}

}  // namespace
}  // namespace deepinfer
