#include "deepinfer/vision/image_service.h"

#include <chrono>
#include <cstring>

#include <openssl/sha.h>

namespace deepinfer::vision {

ImageService::ImageService(std::shared_ptr<const VisionEncoder> encoder, ThreadPool* pool, ImageServiceOptions options)
    : encoder_(std::make_shared<LocalImageEncoder>(std::move(encoder), pool, options.limits)), options_(options) {}

ImageService::ImageService(std::shared_ptr<ImageEncoder> encoder, ImageServiceOptions options)
    : encoder_(std::move(encoder)), options_(options) {}

Result<EncodedImage> ImageService::encode(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  if (const std::string& id = encoder_->info().identity; !id.empty()) {
    std::string salted = id;  // another tower's embeddings (and KV) must never be taken for ours
    salted.push_back('\0');
    salted.append(reinterpret_cast<const char*>(digest), sizeof(digest));
    SHA256(reinterpret_cast<const unsigned char*>(salted.data()), salted.size(), digest);
  }
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
  DI_ASSIGN_OR_RETURN(std::vector<float> emb, encoder_->encode(bytes));
  const ImageEncoderInfo& info = encoder_->info();
  if (emb.size() != size_t(info.tokens_per_image) * size_t(info.embedding_size))
    return corrupt("the image encoder returned {} floats, {} x {} expected", emb.size(),
                          info.tokens_per_image, info.embedding_size);
  EncodedImage out;
  out.hash = key;
  out.embeddings = std::make_shared<const std::vector<float>>(std::move(emb));
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
