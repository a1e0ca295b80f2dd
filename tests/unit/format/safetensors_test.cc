// Safetensors reader: single files, lone-file and sharded model directories, and broken headers,
// offsets, shapes and indexes that must be refused with a message naming the file.
#include "deepinfer/model/format/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "gguf_writer.h"
#include "temp_dir.h"

namespace deepinfer::format {
namespace {

using json = nlohmann::json;
using testing::pattern_bytes;
using testing::TempDir;

#define EXPECT_CONTAINS(text, needle)                                               \
  do {                                                                              \
    std::string di_text_ = (text);                                                  \
    EXPECT_NE(di_text_.find(needle), std::string::npos) << "message: " << di_text_; \
  } while (0)

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  size_t nbytes = 0;
  std::optional<std::pair<uint64_t, uint64_t>> offsets;  // override the packed layout
};

// Packs entries back to back; returns the file bytes. `mutate` may edit the header JSON.
std::vector<uint8_t> build(const std::vector<Entry>& entries,
                           const std::function<void(json&)>& mutate = nullptr) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t at = 0;
  for (const auto& e : entries) {
    auto off = e.offsets.value_or(std::make_pair(at, at + e.nbytes));
    header[e.name] = {
        {"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {off.first, off.second}}};
    at += e.nbytes;
  }
  if (mutate) mutate(header);
  std::string h = header.dump();
  // Assembled in a string: GCC 12 misreports vector inserts after a fixed-size prefix.
  std::string bytes(8, '\0');
  uint64_t n = h.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += h;
  std::vector<uint8_t> data = pattern_bytes(at, 7);
  bytes.append(data.begin(), data.end());
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

const std::vector<Entry> kEntries = {
    {"model.embed.weight", "F32", {2, 3}, 24, {}},
    {"model.norm.weight", "BF16", {4}, 8, {}},
    {"scale", "I64", {}, 8, {}},
    {"fp8", "F8_E4M3", {2, 2}, 4, {}},
    {"empty", "F16", {0, 3}, 0, {}},
};

std::string open_error(const std::vector<uint8_t>& bytes) {
  TempDir dir;
  std::string path = dir.file("w.safetensors");
  testing::write_file(path, bytes);
  auto r = SafetensorsModel::open(path);
  if (r) return "(opened)";
  EXPECT_EQ(r.status().message().rfind(path + ": ", 0), 0u) << r.status().message();
  return r.status().message();
}

TEST(Safetensors, ReadsSingleFile) {
  TempDir dir;
  std::string path = dir.file("w.safetensors");
  testing::write_file(path, build(kEntries));
  Tensor kept;
  {
    auto r = SafetensorsModel::open(path);
    ASSERT_TRUE(r) << r.status().message();
    const SafetensorsModel& m = **r;
    EXPECT_EQ(m.names(), (std::vector<std::string>{"empty", "fp8", "model.embed.weight",
                                                   "model.norm.weight", "scale"}));
    EXPECT_EQ(m.metadata().at("format"), "pt");
    const Tensor* e = m.find("model.embed.weight");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->dtype, DType::kF32);
    EXPECT_EQ(e->ndim, 2);
    EXPECT_EQ(e->shape[0], 2);
    EXPECT_EQ(e->shape[1], 3);
    EXPECT_EQ(std::memcmp(e->data, pattern_bytes(24, 7).data(), 24), 0);
    EXPECT_EQ(m.find("model.norm.weight")->dtype, DType::kBF16);
    EXPECT_EQ(m.find("scale")->ndim, 0);
    EXPECT_EQ(m.find("fp8")->dtype, DType::kF8_E4M3);
    EXPECT_EQ(m.find("empty")->shape[0], 0);
    EXPECT_EQ(m.find("nope"), nullptr);
    EXPECT_EQ(m.shard_of("scale"), path);
    kept = *m.find("model.norm.weight");
  }
  // The view outlives the model object.
  EXPECT_EQ(std::memcmp(kept.data, pattern_bytes(24 + 8, 7).data() + 24, 8), 0);
}

TEST(Safetensors, ReadsDirectoryWithLoneFile) {
  TempDir dir;
  testing::write_file(dir.file("model.safetensors"), build(kEntries));
  auto r = SafetensorsModel::open(dir.path() + "/");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->size(), 5u);
  EXPECT_EQ((*r)->shard_paths().size(), 1u);
}

void write_sharded(const TempDir& dir, const json& weight_map) {
  testing::write_file(dir.file("model-00001-of-00002.safetensors"),
                      build({{"a", "F16", {2, 2}, 8, {}}, {"b", "F32", {1}, 4, {}}}));
  testing::write_file(dir.file("model-00002-of-00002.safetensors"),
                      build({{"c", "I32", {3}, 12, {}}}));
  json index = {{"metadata", {{"total_size", 24}}}, {"weight_map", weight_map}};
  testing::write_file(dir.file("model.safetensors.index.json"), index.dump());
}

const json kGoodMap = {{"a", "model-00001-of-00002.safetensors"},
                       {"b", "model-00001-of-00002.safetensors"},
                       {"c", "model-00002-of-00002.safetensors"}};

TEST(Safetensors, ReadsShardedDirectory) {
  TempDir dir;
  write_sharded(dir, kGoodMap);
  auto r = SafetensorsModel::open(dir.path());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ((*r)->shard_of("c"), dir.file("model-00002-of-00002.safetensors"));
  EXPECT_EQ((*r)->find("c")->dtype, DType::kI32);
  EXPECT_EQ(std::memcmp((*r)->find("c")->data, pattern_bytes(12, 7).data(), 12), 0);
}

TEST(Safetensors, RejectsBrokenIndexes) {
  TempDir dir;
  std::string index = dir.file("model.safetensors.index.json");
  json missing = kGoodMap;
  missing["c"] = "model-00003-of-00002.safetensors";
  write_sharded(dir, missing);
  auto r = SafetensorsModel::open(dir.path());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_CONTAINS(
      r.status().message(),
      index + ": shard 'model-00003-of-00002.safetensors' (holding tensor 'c') is missing");

  json wrong = kGoodMap;
  wrong["a"] = "model-00002-of-00002.safetensors";
  write_sharded(dir, wrong);
  EXPECT_CONTAINS(SafetensorsModel::open(dir.path()).status().message(),
                  "tensor 'a' is mapped to model-00002-of-00002.safetensors but that shard");

  json escape = kGoodMap;
  escape["a"] = "../model.safetensors";
  write_sharded(dir, escape);
  EXPECT_CONTAINS(SafetensorsModel::open(dir.path()).status().message(),
                  "outside the model directory");

  testing::write_file(index, std::string("{\"weight_map\": "));
  EXPECT_CONTAINS(SafetensorsModel::open(dir.path()).status().message(),
                  index + ": not valid JSON");

  // The same tensor in two shards.
  testing::write_file(dir.file("model-00002-of-00002.safetensors"),
                      build({{"a", "F16", {4}, 8, {}}}));
  write_sharded(dir, kGoodMap);
  testing::write_file(dir.file("model-00002-of-00002.safetensors"),
                      build({{"a", "F16", {4}, 8, {}}, {"c", "I32", {3}, 12, {}}}));
  EXPECT_CONTAINS(SafetensorsModel::open(dir.path()).status().message(),
                  "tensor 'a' also appears in");

  TempDir empty;
  auto none = SafetensorsModel::open(empty.path());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_CONTAINS(none.status().message(), "no model.safetensors.index.json or model.safetensors");
  EXPECT_EQ(SafetensorsModel::open(empty.file("x")).status().code(), StatusCode::kNotFound);
}

TEST(Safetensors, RejectsBadHeaders) {
  std::vector<uint8_t> good = build(kEntries);
  std::vector<uint8_t> b = good;
  uint64_t huge = good.size();  // 8 bytes short of fitting
  std::memcpy(b.data(), &huge, 8);
  EXPECT_CONTAINS(open_error(b), "truncated: header length " + std::to_string(huge) +
                                     " goes beyond the end of the file");
  EXPECT_CONTAINS(open_error({1, 2, 3}), "truncated: the 8-byte header length");
  b = good;
  b[8] = '#';
  EXPECT_CONTAINS(open_error(b), "header is not valid JSON");
  EXPECT_CONTAINS(open_error(build({}, [](json& h) { h = json::array({1}); })),
                  "header is not a JSON object");
  EXPECT_CONTAINS(open_error(build({},
                                   [](json& h) {
                                     h["x"] = {{"dtype", "F32"}};
                                   })),
                  "tensor 'x' needs a string dtype");
  EXPECT_CONTAINS(open_error(build({{"u", "U8", {4}, 4, {}}})),
                  "unsupported dtype 'U8' for tensor 'u'");
  EXPECT_CONTAINS(open_error(build({{"u", "Q9", {4}, 4, {}}})), "unsupported dtype 'Q9'");
  EXPECT_CONTAINS(open_error(build({{"r", "I8", {1, 1, 1, 1, 1}, 1, {}}})), "5 dimensions");
  EXPECT_CONTAINS(open_error(build({{"n", "I8", {-1}, 0, {}}})), "not a non-negative integer");
  EXPECT_CONTAINS(open_error(build({{"o", "I64", {int64_t{1} << 62}, 8, {}}})),
                  "byte size overflows");
  EXPECT_CONTAINS(open_error(build({}, [](json& h) { h["__metadata__"] = 3; })),
                  "__metadata__ is not an object");
}

TEST(Safetensors, RejectsBadOffsets) {
  EXPECT_CONTAINS(open_error(build({{"w", "F32", {4}, 16, std::make_pair(0, 32)}})),
                  "tensor 'w' data_offsets [0, 32) fall outside the data section of 16 bytes");
  EXPECT_CONTAINS(open_error(build({{"w", "F32", {4}, 16, std::make_pair(16, 0)}})),
                  "fall outside the data section");
  EXPECT_CONTAINS(open_error(build({{"w", "F32", {3}, 16, {}}})),
                  "tensor 'w' has 16 data bytes but shape [3] of F32 needs 12");
  EXPECT_CONTAINS(
      open_error(build({{"a", "F32", {4}, 16, {}}, {"b", "F32", {2}, 8, std::make_pair(8, 16)}})),
      "tensors 'a' and 'b' overlap");
  EXPECT_CONTAINS(
      open_error(build({},
                       [](json& h) {
                         h["w"] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0}}};
                       })),
      "data_offsets must be two non-negative integers");
}

TEST(Safetensors, EveryTruncationFails) {
  std::vector<uint8_t> full = build(kEntries);
  TempDir dir;
  std::string path = dir.file("cut.safetensors");
  testing::write_file(path, full);
  // Shrinking one file in place keeps this cheap: one syscall per cut point.
  for (size_t cut = full.size(); cut-- > 0;) {
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(cut)), 0);
    auto r = SafetensorsModel::open(path);
    ASSERT_FALSE(r) << "cut at " << cut << " opened";
    ASSERT_EQ(r.status().message().rfind(path + ": ", 0), 0u) << r.status().message();
  }
}

}  // namespace
}  // namespace deepinfer::format
