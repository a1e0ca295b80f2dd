// resolve_model: .gguf files, Hugging Face directories, catalogue names (downloaded or not),
// the default, and the errors for everything else.
#include "deepinfer/model/model_path.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "../format/temp_dir.h"
#include "deepinfer/model/catalog.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(ResolveModel, GgufFile) {
  TempDir dir;
  testing::write_file(dir.file("m.gguf"), std::string("GGUF...."));
  auto r = resolve_model(dir.file("m.gguf"), dir.path());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->kind, ResolvedModel::kGguf);
  EXPECT_EQ(r->path, dir.file("m.gguf"));
  EXPECT_EQ(r->name, "m");
  // GGUF content under another extension is still GGUF; other files are refused.
  testing::write_file(dir.file("weights.bin"), std::string("GGUF...."));
  EXPECT_TRUE(resolve_model(dir.file("weights.bin"), dir.path()));
  testing::write_file(dir.file("notes.txt"), std::string("hello"));
  auto bad = resolve_model(dir.file("notes.txt"), dir.path());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message().rfind(dir.file("notes.txt") + ": not a GGUF file", 0), 0u);
  auto missing = resolve_model(dir.file("gone.gguf"), dir.path());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), dir.file("gone.gguf") + ": no such file or directory");
}

TEST(ResolveModel, HuggingFaceDirectory) {
  TempDir dir;
  std::string m = dir.file("SmolLM2-135M");
  fs::create_directories(m);
  auto no_config = resolve_model(m, dir.path());
  ASSERT_FALSE(no_config);
  EXPECT_NE(no_config.status().message().find("has no config.json"), std::string::npos);
  testing::write_file(m + "/config.json", std::string("{}"));
  auto no_weights = resolve_model(m, dir.path());
  ASSERT_FALSE(no_weights);
  EXPECT_NE(no_weights.status().message().find("no *.safetensors"), std::string::npos);
  testing::write_file(m + "/model.safetensors", std::string("x"));
  auto r = resolve_model(m + "/", dir.path());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->kind, ResolvedModel::kHfDir);
  EXPECT_EQ(r->name, "SmolLM2-135M");
}

TEST(ResolveModel, CatalogueNames) {
  TempDir home;
  auto absent = resolve_model("smollm2-135m-instruct", home.path());
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(
      absent.status().message(),
      "model 'smollm2-135m-instruct' is not downloaded; run: deepinfer pull smollm2-135m-instruct");
  // The empty argument means the default model.
  EXPECT_EQ(resolve_model("", home.path()).status().message(), absent.status().message());

  const CatalogEntry* e = find_catalog_entry(kDefaultModelName);
  std::string path = model_file_path(*e, home.path());
  fs::create_directories(models_dir(home.path()));
  testing::write_file(path, std::string("GGUF"));
  auto partial = resolve_model("smollm2-135m-instruct", home.path());
  ASSERT_FALSE(partial);
  EXPECT_NE(partial.status().message().find("incomplete or damaged (4 bytes, expected 98362432)"),
            std::string::npos);
  fs::resize_file(path, e->size);  // sparse: only the size is checked here
  auto r = resolve_model("", home.path());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->kind, ResolvedModel::kGguf);
  EXPECT_EQ(r->path, path);
  EXPECT_EQ(r->name, "smollm2-135m-instruct");

  auto unknown = resolve_model("gpt-17", home.path());
  EXPECT_EQ(unknown.status().message(),
            "model 'gpt-17' is not a file, a directory or a catalogue name (known: "
            "smollm2-135m-instruct)");
}

}  // namespace
}  // namespace deepinfer::model
