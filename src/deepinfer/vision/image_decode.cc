// Format sniffing, the size limits shared by every decoder, and alpha compositing.
#include <cstring>

#include "deepinfer/vision/image.h"

namespace deepinfer::vision {

const char* image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kTiff: return "TIFF";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  auto starts = [&](const char* magic, size_t n, size_t at = 0) {
    return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
  };
  if (starts("\xFF\xD8\xFF", 3)) return ImageFormat::kJpeg;
  if (starts("\x89PNG\r\n\x1A\n", 8)) return ImageFormat::kPng;
  if (starts("RIFF", 4) && starts("WEBP", 4, 8)) return ImageFormat::kWebp;
  if (starts("GIF87a", 6) || starts("GIF89a", 6)) return ImageFormat::kGif;
  if (starts("BM", 2)) return ImageFormat::kBmp;
  if (starts("II*\0", 4) || starts("MM\0*", 4)) return ImageFormat::kTiff;
  return ImageFormat::kUnknown;
}

Status check_dimensions(const char* format, int64_t width, int64_t height, const DecodeLimits& limits) {
  if (width <= 0 || height <= 0) return corrupt("{} image has an empty size ({}x{})", format, width, height);
  if (width > limits.max_side || height > limits.max_side || width * height > limits.max_pixels)
    return invalid_argument("{} image is too large: {}x{} ({:.1f} megapixels; the limit is {} pixels a side and "
                            "{:.1f} megapixels)", format, width, height, static_cast<double>(width * height) / 1e6,
                            limits.max_side, static_cast<double>(limits.max_pixels) / 1e6);
  return Status::ok();
}

void composite_on_white(const uint8_t* rgba, int64_t n_pixels, uint8_t* rgb) {
  // Pillow's AlphaComposite.c with an opaque white destination: 7 fractional bits, division by
  // 255 as ((x >> 8) + x) >> 8.
  constexpr uint32_t kBits = 7;
  auto div255 = [](uint32_t x) { return ((x >> 8) + x) >> 8; };
  for (int64_t i = 0; i < n_pixels; ++i) {
    const uint8_t* s = rgba + i * 4;
    uint8_t* d = rgb + i * 3;
    const uint32_t a = s[3];
    if (a == 0) {
      d[0] = d[1] = d[2] = 255;
      continue;
    }
    const uint32_t blend = 255u * (255u - a);
    const uint32_t outa255 = a * 255u + blend;
    const uint32_t coef1 = a * 255u * 255u * (1u << kBits) / outa255;
    const uint32_t coef2 = 255u * (1u << kBits) - coef1;
    for (int c = 0; c < 3; ++c) {
      const uint32_t t = s[c] * coef1 + 255u * coef2;
      d[c] = static_cast<uint8_t>(div255(t + (0x80u << kBits)) >> kBits);
    }
  }
}

Result<Image> decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  if (bytes.empty()) return invalid_argument("image is empty (0 bytes)");
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes)
    return invalid_argument("image is too large: {} bytes (the limit is {} bytes)", bytes.size(), limits.max_bytes);
  const ImageFormat f = sniff_image_format(bytes);
  switch (f) {
    case ImageFormat::kJpeg: return decode_jpeg(bytes, limits);
    case ImageFormat::kPng: return decode_png(bytes, limits);
    case ImageFormat::kWebp: return decode_webp(bytes, limits);
    case ImageFormat::kUnknown:
      return unsupported("image format not recognized (supported: JPEG, PNG, WebP)");
    default:
      return unsupported("{} images are not supported (supported: JPEG, PNG, WebP)", image_format_name(f));
  }
}

}  // namespace deepinfer::vision
