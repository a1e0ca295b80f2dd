// GGUF reader: round trip of every metadata type and several tensors, then broken files of
// every kind (truncated at each byte, bad header, bad offsets, absurd counts) that must fail
// with a message naming the file, never crash.
#include "deepinfer/model/format/gguf.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <random>

#include "gguf_writer.h"
#include "temp_dir.h"

namespace deepinfer::format {
namespace {

using testing::GgufWriter;
using testing::pattern_bytes;
using testing::TempDir;
using Kind = GgufValue::Kind;

#define EXPECT_CONTAINS(text, needle)                                               \
  do {                                                                              \
    std::string di_text_ = (text);                                                  \
    EXPECT_NE(di_text_.find(needle), std::string::npos) << "message: " << di_text_; \
  } while (0)

// A file with every metadata kind and tensors of several types and ranks.
GgufWriter full_writer() {
  GgufWriter w;
  w.alignment = 64;
  w.add_scalar<uint32_t>("general.alignment", testing::kGU32, 64);
  w.add_string("general.architecture", "llama");
  w.add_scalar<uint8_t>("t.u8", testing::kGU8, 200);
  w.add_scalar<int8_t>("t.i8", testing::kGI8, -100);
  w.add_scalar<uint16_t>("t.u16", testing::kGU16, 60000);
  w.add_scalar<int16_t>("t.i16", testing::kGI16, -30000);
  w.add_scalar<uint32_t>("t.u32", testing::kGU32, 4000000000u);
  w.add_scalar<int32_t>("t.i32", testing::kGI32, -2000000000);
  w.add_scalar<float>("t.f32", testing::kGF32, 1.5f);
  w.add_scalar<uint8_t>("t.bool", testing::kGBool, 1);
  w.add_scalar<uint64_t>("t.u64", testing::kGU64, 18000000000000000000ull);
  w.add_scalar<int64_t>("t.i64", testing::kGI64, -9000000000000000000ll);
  w.add_scalar<double>("t.f64", testing::kGF64, 2.25);
  w.add_string("t.empty", "");
  w.add_array<int32_t>("t.arr_i32", testing::kGI32, {1, -2, 3});
  w.add_array<uint8_t>("t.arr_bool", testing::kGBool, {1, 0, 1});
  w.add_array<float>("t.arr_f32", testing::kGF32, {0.5f, -1.0f});
  w.add_array<double>("t.arr_f64", testing::kGF64, {});
  w.add_string_array("t.arr_str", {"a", "", "hello world"});
  w.add_tensor({"f32.2d", 0, {3, 2}, pattern_bytes(24, 1), {}});
  w.add_tensor({"f16.1d", 1, {5}, pattern_bytes(10, 2), {}});
  w.add_tensor({"q8_0.2d", 8, {64, 2}, pattern_bytes(4 * 34, 3), {}});
  w.add_tensor({"q4_k.1d", 12, {256}, pattern_bytes(144, 4), {}});
  w.add_tensor({"i32.4d", 26, {2, 1, 3, 2}, pattern_bytes(48, 5), {}});
  return w;
}

// Opens bytes written to a file; on failure checks that the message starts with the path.
Result<std::shared_ptr<GgufFile>> open_bytes(const TempDir& dir, const std::vector<uint8_t>& b) {
  std::string path = dir.file("model.gguf");
  testing::write_file(path, b);
  auto r = GgufFile::open(path);
  if (!r) {
    EXPECT_EQ(r.status().message().rfind(path + ": ", 0), 0u) << r.status().message();
  }
  return r;
}

std::string open_error(const std::vector<uint8_t>& b) {
  TempDir dir;
  auto r = open_bytes(dir, b);
  return r ? std::string("(opened)") : r.status().message();
}

TEST(Gguf, RoundTripsEveryMetadataTypeAndTensor) {
  TempDir dir;
  auto r = open_bytes(dir, full_writer().build());
  ASSERT_TRUE(r) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("t.u8"), 200);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_int("t.u16"), 60000);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000);
  EXPECT_EQ(f.get_float("t.f32"), 1.5);
  EXPECT_EQ(f.get_bool("t.bool"), true);
  EXPECT_EQ(f.get_int("t.u64"), std::nullopt);  // above INT64_MAX
  EXPECT_EQ(std::get<uint64_t>(f.find("t.u64")->value), 18000000000000000000ull);
  EXPECT_EQ(f.get_float("t.u64"), 18000000000000000000.0);
  EXPECT_EQ(f.get_int("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(f.get_float("t.f64"), 2.25);
  EXPECT_EQ(f.get_float("t.i32"), -2e9);
  EXPECT_EQ(f.get_string("t.empty"), "");
  EXPECT_EQ(f.find("t.f64")->kind, Kind::kF64);
  // Wrong kinds and absent keys are nullopt, not a crash.
  EXPECT_EQ(f.get_int("t.f32"), std::nullopt);
  EXPECT_EQ(f.get_string("t.u8"), std::nullopt);
  EXPECT_EQ(f.get_bool("t.u8"), std::nullopt);
  EXPECT_EQ(f.get_int("nope"), std::nullopt);
  EXPECT_EQ(f.get_string_array("t.arr_i32"), nullptr);

  ASSERT_NE(f.get_int_array("t.arr_i32"), nullptr);
  EXPECT_EQ(*f.get_int_array("t.arr_i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.find("t.arr_i32")->array_kind, Kind::kI32);
  EXPECT_EQ(*f.get_int_array("t.arr_bool"), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(*f.get_float_array("t.arr_f32"), (std::vector<double>{0.5, -1.0}));
  EXPECT_TRUE(f.get_float_array("t.arr_f64")->empty());
  EXPECT_EQ(*f.get_string_array("t.arr_str"), (std::vector<std::string>{"a", "", "hello world"}));

  ASSERT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.tensors()[0].name, "f32.2d");  // file order is kept
  const GgufTensorInfo* q8 = f.find_tensor("q8_0.2d");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->dtype, DType::kQ8_0);
  EXPECT_EQ(q8->nbytes, 4u * 34);
  EXPECT_EQ(f.find_tensor("missing"), nullptr);

  Tensor t4 = f.tensor(*f.find_tensor("i32.4d"));
  EXPECT_EQ(t4.ndim, 4);
  EXPECT_EQ(t4.shape, (std::array<int64_t, 4>{2, 3, 1, 2}));  // ne reversed
  EXPECT_EQ(t4.nbytes(), 48u);
  EXPECT_EQ(std::memcmp(t4.data, pattern_bytes(48, 5).data(), 48), 0);

  const GgufTensorInfo* first = &f.tensors()[0];
  for (const auto& info : f.tensors()) {
    EXPECT_EQ(info.offset % 64, 0u) << info.name;
    EXPECT_EQ(
        (static_cast<const uint8_t*>(info.data) - static_cast<const uint8_t*>(first->data)) % 64, 0)
        << info.name;
    EXPECT_EQ(f.tensor(info).nbytes(), info.nbytes) << info.name;
  }
}

TEST(Gguf, TensorViewKeepsMappingAlive) {
  TempDir dir;
  Tensor t;
  {
    auto r = open_bytes(dir, full_writer().build());
    ASSERT_TRUE(r);
    t = (*r)->tensor(*(*r)->find_tensor("q4_k.1d"));
  }
  EXPECT_EQ(t.shape[0], 256);
  EXPECT_EQ(std::memcmp(t.data, pattern_bytes(144, 4).data(), 144), 0);
}

TEST(Gguf, ReadsVersion2AndDefaultAlignment) {
  GgufWriter w;
  w.version = 2;
  w.add_tensor({"a", 0, {4}, pattern_bytes(16), {}});
  w.add_tensor({"b", 0, {3}, pattern_bytes(12), {}});
  TempDir dir;
  auto r = open_bytes(dir, w.build());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->version(), 2u);
  EXPECT_EQ((*r)->alignment(), 32u);
  EXPECT_EQ((*r)->find_tensor("b")->offset, 32u);
}

TEST(Gguf, EveryTruncationFails) {
  std::vector<uint8_t> full = full_writer().build();
  TempDir dir;
  std::string path = dir.file("cut.gguf");
  testing::write_file(path, full);
  // Shrinking one file in place keeps this cheap: one syscall per cut point.
  for (size_t cut = full.size(); cut-- > 0;) {
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(cut)), 0);
    auto r = GgufFile::open(path);
    ASSERT_FALSE(r) << "cut at " << cut << " of " << full.size() << " opened";
    ASSERT_EQ(r.status().message().rfind(path + ": ", 0), 0u) << r.status().message();
  }
  testing::write_file(path, full.data(), full.size() - 1);
  EXPECT_EQ(GgufFile::open(path).status().message(),
            path + ": truncated: tensor 'i32.4d' data ends at byte " + std::to_string(full.size()) +
                " but the file has " + std::to_string(full.size() - 1));
}

TEST(Gguf, RandomByteCorruptionNeverCrashes) {
  std::vector<uint8_t> full = full_writer().build();
  std::mt19937 rng(1234);
  TempDir dir;
  std::string path = dir.file("fuzz.gguf");
  testing::write_file(path, full);
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  int failures = 0;
  for (int iter = 0; iter < 300; ++iter) {
    // Flip a few bytes in place (header and metadata hold the interesting ones, so aim half the
    // rounds there), open, then put the original bytes back.
    std::vector<size_t> at(1 + rng() % 4);
    for (auto& p : at) {
      p = rng() % (iter % 2 ? full.size() : std::min<size_t>(full.size(), 700));
      uint8_t v = static_cast<uint8_t>(rng());
      ASSERT_EQ(::pwrite(fd, &v, 1, static_cast<off_t>(p)), 1);
    }
    auto r = GgufFile::open(path);
    if (!r)
      ++failures;
    else
      for (const auto& t : (*r)->tensors()) EXPECT_EQ((*r)->tensor(t).data, t.data);
    for (size_t p : at) ASSERT_EQ(::pwrite(fd, &full[p], 1, static_cast<off_t>(p)), 1);
  }
  ::close(fd);
  EXPECT_GT(failures, 0);
}

TEST(Gguf, RejectsBadHeaders) {
  GgufWriter w = full_writer();
  w.magic = 0x4c4d4747;  // "GGML"
  EXPECT_CONTAINS(open_error(w.build()), "not a GGUF file");
  w = full_writer();
  w.version = 1;
  EXPECT_CONTAINS(open_error(w.build()), "GGUF version 1 is not supported");
  w.version = 4;
  EXPECT_CONTAINS(open_error(w.build()), "GGUF version 4");
  w.version = 0x03000000;
  EXPECT_CONTAINS(open_error(w.build()), "big-endian");
  EXPECT_CONTAINS(open_error({'G', 'G'}), "truncated");
}

TEST(Gguf, RejectsAbsurdCountsWithoutAllocating) {
  GgufWriter w = full_writer();
  w.n_tensors_override = uint64_t{1} << 60;
  EXPECT_CONTAINS(open_error(w.build()), "tensor count 1152921504606846976 cannot fit");
  w = full_writer();
  w.n_kv_override = ~uint64_t{0};
  EXPECT_CONTAINS(open_error(w.build()), "metadata count");

  GgufWriter s;
  s.add_kv("k", testing::kGString,
           [](testing::ByteSink& b) { b.put<uint64_t>(uint64_t{1} << 62); });
  EXPECT_CONTAINS(open_error(s.build()), "metadata 'k' has a string of length 4611686018427387904");
  GgufWriter a;
  a.add_kv("arr", testing::kGArray, [](testing::ByteSink& b) {
    b.put<uint32_t>(testing::kGU64);
    b.put<uint64_t>(uint64_t{1} << 61);
  });
  EXPECT_CONTAINS(open_error(a.build()), "array of 2305843009213693952 elements that cannot fit");
  GgufWriter k;
  k.add_kv("x", 77, [](testing::ByteSink& b) { b.put<uint32_t>(0); });
  EXPECT_CONTAINS(open_error(k.build()), "unknown value type 77");
  GgufWriter n;
  n.add_kv("nest", testing::kGArray, [](testing::ByteSink& b) {
    b.put<uint32_t>(testing::kGArray);
    b.put<uint64_t>(1);
  });
  EXPECT_CONTAINS(open_error(n.build()), "array of arrays");
}

TEST(Gguf, RejectsBadTensorInfos) {
  auto one = [](GgufWriter::TensorSpec t) {
    GgufWriter w;
    w.add_tensor(std::move(t));
    return open_error(w.build());
  };
  EXPECT_CONTAINS(one({"w", 4, {32}, pattern_bytes(32), {}}),
                  "unsupported tensor type 4 for tensor 'w'");
  EXPECT_CONTAINS(one({"w", 8, {33}, pattern_bytes(34), {}}),
                  "not a multiple of the q8_0 block size 32");
  EXPECT_CONTAINS(one({"w", 0, {1, 1, 1, 1, 1}, pattern_bytes(4), {}}), "5 dimensions");
  EXPECT_CONTAINS(one({"w", 0, {4, -1}, pattern_bytes(16), {}}), "negative dimension");
  EXPECT_CONTAINS(one({"w", 0, {int64_t{1} << 40, int64_t{1} << 40}, pattern_bytes(4), {}}),
                  "dimensions overflow");
  EXPECT_CONTAINS(one({"w", 0, {int64_t{1} << 62, 1}, pattern_bytes(4), {}}),
                  "byte size overflows");
  EXPECT_CONTAINS(one({"w", 0, {1 << 20}, pattern_bytes(16), {}}),
                  "truncated: tensor 'w' data ends at byte");
  EXPECT_CONTAINS(one({"w", 0, {4}, pattern_bytes(16), uint64_t{8}}), "offset 8 is not a multiple");
  EXPECT_CONTAINS(one({"w", 0, {4}, pattern_bytes(16), ~uint64_t{31}}), "beyond 2^64");
}

TEST(Gguf, RejectsDuplicatesOverlapsAndBadAlignment) {
  GgufWriter w;
  w.add_tensor({"w", 0, {4}, pattern_bytes(16), {}});
  w.add_tensor({"w", 0, {4}, pattern_bytes(16), {}});
  EXPECT_CONTAINS(open_error(w.build()), "duplicate tensor name 'w'");

  GgufWriter o;
  o.add_tensor({"a", 0, {16}, pattern_bytes(64), {}});
  o.add_tensor({"b", 0, {16}, pattern_bytes(64), uint64_t{32}});
  EXPECT_CONTAINS(open_error(o.build()), "tensors 'a' and 'b' overlap");

  GgufWriter d;
  d.add_scalar<uint32_t>("k", testing::kGU32, 1);
  d.add_scalar<uint32_t>("k", testing::kGU32, 2);
  EXPECT_CONTAINS(open_error(d.build()), "duplicate metadata key 'k'");

  GgufWriter al;
  al.add_scalar<uint32_t>("general.alignment", testing::kGU32, 48);
  EXPECT_CONTAINS(open_error(al.build()), "general.alignment must be a power of two");
}

TEST(Gguf, MetadataOnlyFileOpens) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  TempDir dir;
  auto r = open_bytes(dir, w.build());
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE((*r)->tensors().empty());
}

}  // namespace
}  // namespace deepinfer::format
