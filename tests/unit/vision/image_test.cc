// Image decoding and preprocessing against Pillow / the Hugging Face image processors
// (fixtures from tests/reference/make_vision_fixture.py), and the decoders' errors.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "deepinfer/vision/image.h"
#include "deepinfer/vision/preprocess.h"

namespace deepinfer::vision {
namespace {

std::string dir() { return std::string(DEEPINFER_SOURCE_DIR) + "/tests/reference/fixtures/vision/"; }

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

nlohmann::json index_json() {
  std::ifstream in(dir() + "index.json");
  return nlohmann::json::parse(in);
}

TEST(ImageDecode, MatchesPillowRgbOnEveryFixtureImage) {
  const nlohmann::json ix = index_json();
  const std::vector<uint8_t> decoded = read_file(dir() + "decoded.bin");
  ASSERT_EQ(ix["images"].size(), 7u);
  for (const auto& e : ix["images"]) {
    const std::string name = e["name"];
    Result<Image> img = decode_image(read_file(dir() + "images/" + name));
    ASSERT_TRUE(img.is_ok()) << name << ": " << img.status().message();
    ASSERT_EQ(img->width, e["width"].get<int>()) << name;
    ASSERT_EQ(img->height, e["height"].get<int>()) << name;
    const uint8_t* want = decoded.data() + e["decoded_offset"].get<size_t>();
    int max_diff = 0;
    for (size_t i = 0; i < img->rgb.size(); ++i) max_diff = std::max(max_diff, std::abs(img->rgb[i] - want[i]));
    // Pillow's wheels bundle their own libjpeg-turbo / libwebp builds; the decoders agree exactly.
    EXPECT_EQ(max_diff, 0) << name;
  }
}

TEST(ImagePreprocess, MatchesHuggingFaceSiglipAndClipPixelValues) {
  const nlohmann::json ix = index_json();
  const std::vector<uint8_t> pixels = read_file(dir() + "pixels.bin");
  for (const char* proc : {"siglip", "clip"}) {
    Result<ImageProcessorConfig> cfg = parse_image_processor_config(ix["processors"][proc].dump(), proc);
    ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
    for (const auto& e : ix["images"]) {
      const std::string name = e["name"];
      Result<Image> img = decode_image(read_file(dir() + "images/" + name));
      ASSERT_TRUE(img.is_ok()) << name;
      const std::vector<float> got = preprocess_image(*img, *cfg);
      const auto& shape = e[proc]["shape"];
      ASSERT_EQ(got.size(), shape[0].get<size_t>() * shape[1].get<size_t>() * shape[2].get<size_t>()) << name;
      std::vector<float> want(got.size());
      std::memcpy(want.data(), pixels.data() + e[proc]["offset"].get<size_t>(), want.size() * sizeof(float));
      double max_err = 0;
      for (size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, static_cast<double>(std::fabs(got[i] - want[i])));
      // Same uint8 resize (Pillow's fixed point, reproduced), same float32 rescale/normalize.
      EXPECT_LE(max_err, 1e-6) << proc << " " << name;
    }
  }
}

TEST(ImageDecode, TruncatedImagesAreCorruptErrors) {
  for (const char* name : {"rgb.jpg", "rgba.png", "lossy.webp", "alpha.webp", "big.png"}) {
    std::vector<uint8_t> b = read_file(dir() + "images/" + name);
    for (size_t keep : {b.size() / 2, b.size() - 8, size_t{20}}) {
      Result<Image> img = decode_image(std::span<const uint8_t>(b.data(), keep));
      ASSERT_FALSE(img.is_ok()) << name << " cut to " << keep;
      EXPECT_EQ(img.status().code(), StatusCode::kCorrupt) << name << ": " << img.status().message();
    }
  }
}

TEST(ImageDecode, GarbageBodiesAreErrorsNotCrashes) {
  for (const char* name : {"rgb.jpg", "rgba.png", "lossy.webp"}) {
    std::vector<uint8_t> b = read_file(dir() + "images/" + name);
    for (size_t i = 16; i < b.size(); i += 3) b[i] = static_cast<uint8_t>(b[i] * 31 + 7);
    Result<Image> img = decode_image(b);
    if (img.is_ok()) {  // a scrambled JPEG body can still decode; it must then be whole
      EXPECT_EQ(img->rgb.size(), static_cast<size_t>(img->width) * img->height * 3) << name;
    } else {
      EXPECT_EQ(img.status().code(), StatusCode::kCorrupt) << name << ": " << img.status().message();
    }
  }
}

TEST(ImageDecode, UnsupportedFormatsAndEmptyInputAreNamed) {
  const std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0};
  Result<Image> r = decode_image(gif);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("GIF"), std::string::npos) << r.status().message();
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_EQ(decode_image(text).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(decode_image(std::vector<uint8_t>{}).status().code(), StatusCode::kInvalidArgument);
}

TEST(ImageDecode, HundredMegapixelHeaderIsRefusedBeforeDecoding) {
  // rgb.jpg with its SOF0 frame header patched to 10000 x 10000.
  std::vector<uint8_t> b = read_file(dir() + "images/rgb.jpg");
  size_t sof = 0;
  for (size_t i = 2; i + 9 < b.size(); ++i)
    if (b[i] == 0xFF && (b[i + 1] == 0xC0 || b[i + 1] == 0xC2)) {
      sof = i;
      break;
    }
  ASSERT_GT(sof, 0u);
  b[sof + 5] = 10000 >> 8;
  b[sof + 6] = 10000 & 0xFF;
  b[sof + 7] = 10000 >> 8;
  b[sof + 8] = 10000 & 0xFF;
  Result<Image> r = decode_image(b);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("100.0 megapixels"), std::string::npos) << r.status().message();
}

TEST(ImageDecode, ByteLimitIsChecked) {
  const std::vector<uint8_t> b = read_file(dir() + "images/big.png");
  DecodeLimits small;
  small.max_bytes = 100;
  Result<Image> r = decode_image(b, small);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("too large"), std::string::npos);
  DecodeLimits few_pixels;
  few_pixels.max_pixels = 100;
  EXPECT_EQ(decode_image(b, few_pixels).status().code(), StatusCode::kInvalidArgument);
}

TEST(ImagePreprocess, UnsupportedProcessorsAreRefused) {
  EXPECT_EQ(parse_image_processor_config(R"({"image_processor_type": "Qwen2VLImageProcessor"})", "x").status().code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(parse_image_processor_config(R"({"image_processor_type": "SiglipImageProcessor", "resample": 0})", "x")
                .status()
                .code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(parse_image_processor_config("{not json", "x").status().code(), StatusCode::kCorrupt);
}

}  // namespace
}  // namespace deepinfer::vision
