// The real default model, when it has been downloaded: parses fully and has the expected shape.
// Skipped (with a message) when absent, except under CI=true where its absence is a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "deepinfer/model/format/gguf.h"

namespace deepinfer::format {
namespace {

std::string real_model_path() {
  const char* home = std::getenv("DEEPINFER_HOME");
  std::string base = home && *home ? home
                                   : std::string(std::getenv("HOME") ? std::getenv("HOME") : "") +
                                         "/.cache/deepinfer";
  return base + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(GgufRealModel, SmolLM2Q4_1) {
  std::string path = real_model_path();
  if (!std::filesystem::exists(path)) {
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") FAIL() << "real model missing under CI: " << path;
    GTEST_SKIP() << "real model not downloaded (" << path
                 << "); run: deepinfer pull smollm2-135m-instruct";
  }
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.tensors().size(), 272u);
  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, DType::kQ8_0);
  Tensor t = f.tensor(*emb);
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.shape[0], 49152);
  EXPECT_EQ(t.shape[1], 576);
  ASSERT_NE(f.get_string_array("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ(f.get_int("llama.block_count"), 30);
}

}  // namespace
}  // namespace deepinfer::format
