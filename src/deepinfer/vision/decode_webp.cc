// WebP (lossy and lossless; the first frame of an animation is refused as unsupported) through
// libwebp, decoded to RGBA and composited onto white.
#include <webp/decode.h>

#include "deepinfer/vision/image.h"

namespace deepinfer::vision {

Result<Image> decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  WebPBitstreamFeatures features;
  const VP8StatusCode code = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (code == VP8_STATUS_NOT_ENOUGH_DATA) return corrupt("WebP image is truncated");
  if (code != VP8_STATUS_OK) return corrupt("WebP image is corrupt (libwebp status {})", static_cast<int>(code));
  if (features.has_animation) return unsupported("animated WebP images are not supported");
  DI_RETURN_IF_ERROR(check_dimensions("WebP", features.width, features.height, limits));
  Image img;
  img.width = features.width;
  img.height = features.height;
  const int64_t n = int64_t{img.width} * img.height;
  std::vector<uint8_t> rgba(static_cast<size_t>(n * 4));
  if (WebPDecodeRGBAInto(bytes.data(), bytes.size(), rgba.data(), rgba.size(), img.width * 4) == nullptr)
    return corrupt("WebP image is truncated or corrupt");
  img.rgb.resize(static_cast<size_t>(n * 3));
  composite_on_white(rgba.data(), n, img.rgb.data());
  return img;
}

}  // namespace deepinfer::vision
