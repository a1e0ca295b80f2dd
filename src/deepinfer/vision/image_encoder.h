// Image bytes in, the input embeddings of its placeholder tokens out: in this process (the
// vision tower and projector, LocalImageEncoder) or in a vision-encoder pool (`serve --role
// vision`, serve/remote_image_encoder.h). ImageService puts its cache and limits in front.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/vision/image.h"
#include "deepinfer/vision/vision_encoder.h"

namespace deepinfer::vision {

struct ImageEncoderInfo {
  int image_token_id = 0;    // the placeholder the chat template writes once per image
  int tokens_per_image = 0;  // rows of embeddings per image
  int embedding_size = 0;    // the language model's hidden size
  // "" for this process's own tower; a remote pool's identity (its weights' digest), which
  // goes into every image hash, so KV and embeddings from another tower are never mixed up.
  std::string identity;
};

class ImageEncoder {
 public:
  virtual ~ImageEncoder() = default;
  virtual const ImageEncoderInfo& info() const = 0;
  // Embeddings [tokens_per_image * embedding_size] of one encoded image (JPEG / PNG / WebP).
  // A bad image is InvalidArgument naming the problem; a pool that cannot be reached is
  // ResourceExhausted (a 503 to clients).
  virtual Result<std::vector<float>> encode(std::string_view bytes) = 0;
};

// The tower in this process: decode (with `limits`), preprocess, tower, projector. One image at
// a time (the pool is shared with the caller's other work).
class LocalImageEncoder : public ImageEncoder {
 public:
  LocalImageEncoder(std::shared_ptr<const VisionEncoder> encoder, ThreadPool* pool, DecodeLimits limits);
  const ImageEncoderInfo& info() const override { return info_; }
  Result<std::vector<float>> encode(std::string_view bytes) override;

 private:
  std::shared_ptr<const VisionEncoder> encoder_;
  ThreadPool* pool_;
  DecodeLimits limits_;
  ImageEncoderInfo info_;
  std::mutex encode_mu_;
};

}  // namespace deepinfer::vision
