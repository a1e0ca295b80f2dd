#include "deepinfer/vision/image_service.h"

#include <chrono>
#include <cstring>

#include <openssl/sha.h>

namespace deepinfer::vision {

ImageService::ImageService(std::shared_ptr<const VisionEncoder> encoder, ThreadPool* pool, ImageServiceOptions options)
    : encoder_(std::move(encoder)), pool_(pool), options_(options) {}

Result<EncodedImage> ImageService::encode(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  Key key;
  std::memcpy(key.data(), digest, sizeof(key));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.cache_hits;
      return *it->second;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  DI_ASSIGN_OR_RETURN(Image img, decode_image(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                                      bytes.size()),
                                              options_.limits));
  const std::vector<float> pixels = preprocess_image(img, encoder_->processor());
  EncodedImage out;
  out.hash = key;
  {
    std::lock_guard<std::mutex> lock(encode_mu_);
    model::ForwardContext ctx{pool_, false};
    DI_ASSIGN_OR_RETURN(std::vector<float> emb, encoder_->encode(pixels, ctx));
    out.embeddings = std::make_shared<const std::vector<float>>(std::move(emb));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.encoded;
  stats_.encode_seconds += secs;
  if (index_.count(key) == 0 && options_.cache_entries > 0) {
    lru_.push_front(out);
    index_[key] = lru_.begin();
    while (lru_.size() > options_.cache_entries) {
      index_.erase(lru_.back().hash);
      lru_.pop_back();
    }
  }
  return out;
}

ImageServiceStats ImageService::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace deepinfer::vision
