// Images in, prompt embeddings out, for every API surface: an ImageEncoder (this process's
// tower, or a vision-encoder pool) behind an LRU cache of embeddings keyed by the SHA-256 of the
// image bytes (and the encoder's identity), so the same image in a later turn (or another
// request) is not encoded again. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/vision/image.h"
#include "deepinfer/vision/image_encoder.h"
#include "deepinfer/vision/vision_encoder.h"

namespace deepinfer::vision {

struct EncodedImage {
  // The first 128 bits of SHA-256(bytes); with a remote encoder, of SHA-256(its identity, that).
  std::array<uint64_t, 2> hash{};
  std::shared_ptr<const std::vector<float>> embeddings;  // [tokens_per_image * embedding_size]
};

struct ImageServiceOptions {
  DecodeLimits limits;
  int max_images_per_request = 8;
  size_t cache_entries = 256;
};

struct ImageServiceStats {
  uint64_t encoded = 0;     // images run through the tower
  uint64_t cache_hits = 0;  // images served from the embedding cache
  double encode_seconds = 0;  // decode + preprocess + tower + projector, summed
};

class ImageService {
 public:
  // This process's tower (a LocalImageEncoder with options.limits).
  ImageService(std::shared_ptr<const VisionEncoder> encoder, ThreadPool* pool, ImageServiceOptions options = {});
  ImageService(std::shared_ptr<ImageEncoder> encoder, ImageServiceOptions options = {});

  const ImageEncoderInfo& info() const { return encoder_->info(); }
  const ImageServiceOptions& options() const { return options_; }
  // Embeddings of one image given as encoded bytes (JPEG / PNG / WebP). Bad images are errors
  // from the decoder (corrupt, unsupported, too large).
  Result<EncodedImage> encode(std::string_view bytes);
  ImageServiceStats stats() const;

 private:
  std::shared_ptr<ImageEncoder> encoder_;
  ImageServiceOptions options_;
  mutable std::mutex mu_;
  using Key = std::array<uint64_t, 2>;
  struct KeyHash {
    size_t operator()(const Key& k) const { return static_cast<size_t>(k[0] ^ (k[1] * 0x9E3779B97F4A7C15ull)); }
  };
  std::list<EncodedImage> lru_;  // most recent first
  std::unordered_map<Key, std::list<EncodedImage>::iterator, KeyHash> index_;
  ImageServiceStats stats_;
};

}  // namespace deepinfer::vision
