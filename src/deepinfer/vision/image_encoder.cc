#include "deepinfer/vision/image_encoder.h"

#include <span>

#include "deepinfer/vision/preprocess.h"

namespace deepinfer::vision {

LocalImageEncoder::LocalImageEncoder(std::shared_ptr<const VisionEncoder> encoder, ThreadPool* pool,
                                     DecodeLimits limits)
    : encoder_(std::move(encoder)), pool_(pool), limits_(limits) {
  info_.image_token_id = encoder_->image_token_id();
  info_.tokens_per_image = encoder_->tokens_per_image();
  info_.embedding_size = encoder_->embedding_size();
}

Result<std::vector<float>> LocalImageEncoder::encode(std::string_view bytes) {
  DI_ASSIGN_OR_RETURN(Image img, decode_image(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                                      bytes.size()),
                                              limits_));
  const std::vector<float> pixels = preprocess_image(img, encoder_->processor());
  std::lock_guard<std::mutex> lock(encode_mu_);
  model::ForwardContext ctx{pool_, false};
  return encoder_->encode(pixels, ctx);
}

}  // namespace deepinfer::vision
