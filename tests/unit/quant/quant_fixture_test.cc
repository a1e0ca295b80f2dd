// Bit-exactness of our scalar (de)quantizers against gguf.quants (the committed fixture made by
// tests/reference/make_quant_fixture.py).
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "deepinfer/tensor/dtype.h"
#include "deepinfer/tensor/quant.h"

namespace deepinfer {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Fixture {
  nlohmann::json index;
  std::string blob;
};

const Fixture& fixture() {
  static const Fixture fx = [] {
    const std::string dir = std::string(DEEPINFER_SOURCE_DIR) + "/tests/reference/fixtures/";
    Fixture f;
    f.index = nlohmann::json::parse(read_file(dir + "quant_fixture.json"));
    f.blob = read_file(dir + "quant_fixture.bin");
    return f;
  }();
  return fx;
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(QuantFixture, DequantizeMatchesGgufBitExact) {
  int checked = 0;
  for (const auto& e : fixture().index["entries"]) {
    if (e["op"] != "dequantize") continue;
    auto type = dtype_from_ggml_id(e["ggml_id"].get<uint32_t>());
    ASSERT_TRUE(type.has_value()) << e["type"];
    const int64_t n = e["n"];
    ASSERT_EQ(row_bytes(*type, n), e["in_bytes"].get<size_t>()) << e["type"];
    const char* in = fixture().blob.data() + e["in_offset"].get<size_t>();
    const char* want_raw = fixture().blob.data() + e["out_offset"].get<size_t>();
    std::vector<float> want(n), got(n);
    std::memcpy(want.data(), want_raw, n * 4);
    ASSERT_TRUE(dequantize_row(*type, in, got.data(), n).is_ok());
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 5; ++i) {
      if (float_bits(got[i]) != float_bits(want[i])) {
        ++bad;
        ADD_FAILURE() << e["type"] << " element " << i << ": got " << got[i] << " want " << want[i];
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 10);
}

TEST(QuantFixture, QuantizeMatchesGgufBitExact) {
  int checked = 0;
  for (const auto& e : fixture().index["entries"]) {
    if (e["op"] != "quantize") continue;
    auto type = dtype_from_ggml_id(e["ggml_id"].get<uint32_t>());
    ASSERT_TRUE(type.has_value()) << e["type"];
    const int64_t n = e["n"];
    const size_t bytes = e["out_bytes"];
    ASSERT_EQ(row_bytes(*type, n), bytes) << e["type"];
    std::vector<float> x(n);
    std::memcpy(x.data(), fixture().blob.data() + e["in_offset"].get<size_t>(), n * 4);
    const auto* want = reinterpret_cast<const uint8_t*>(fixture().blob.data() + e["out_offset"].get<size_t>());
    std::vector<uint8_t> got(bytes);
    ASSERT_TRUE(quantize_row(*type, x.data(), got.data(), n).is_ok());
    int bad = 0;
    for (size_t i = 0; i < bytes && bad < 5; ++i) {
      if (got[i] != want[i]) {
        ++bad;
        ADD_FAILURE() << e["type"] << " byte " << i << ": got " << int(got[i]) << " want " << int(want[i]);
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

}  // namespace
}  // namespace deepinfer
