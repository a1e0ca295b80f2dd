// Decoded images and the decoders' limits: JPEG (libjpeg-turbo), PNG (libpng) and WebP (libwebp)
// bytes in, 8-bit RGB out. Every malformed, truncated, oversized or unsupported input is a Status
// naming the format and the problem; nothing here aborts on bad bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::vision {

// 8-bit RGB, row-major, no padding: rgb[(y * width + x) * 3 + c].
struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // [height * width * 3]
};

struct DecodeLimits {
  int64_t max_bytes = 20 << 20;       // encoded size
  int64_t max_pixels = 40'000'000;    // width * height, checked from the header before decoding
  int max_side = 16384;               // either dimension
};

enum class ImageFormat { kUnknown, kJpeg, kPng, kWebp, kGif, kBmp, kTiff };

const char* image_format_name(ImageFormat f);
// The format named by the leading bytes (magic numbers), kUnknown when none matches.
ImageFormat sniff_image_format(std::span<const uint8_t> bytes);

// Decodes JPEG, PNG or WebP into RGB. Transparent pixels are composited onto white, as the
// Hugging Face image processors' convert_rgb does; 16-bit PNG samples keep their high byte, as
// Pillow does. EXIF orientation is not applied (Pillow's Image.open does not either).
Result<Image> decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits = {});

// Per-format decoders (decode_image dispatches to them after sniffing and the size check).
Result<Image> decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits);
Result<Image> decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits);
Result<Image> decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits);

// Shared by the decoders: error when width x height is empty or over the limits.
Status check_dimensions(const char* format, int64_t width, int64_t height, const DecodeLimits& limits);
// Pillow's alpha_composite of an RGBA pixel over opaque white, then RGB (bit-exact).
void composite_on_white(const uint8_t* rgba, int64_t n_pixels, uint8_t* rgb);

}  // namespace deepinfer::vision
