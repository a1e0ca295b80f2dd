// `--vision-encoder URL[,URL]`: the LLM server's images go to a vision-encoder pool (`serve
// --role vision`, vision_role.h) instead of a tower in this process. Each image is sent to one
// encoder (round robin over those answering); an encoder that cannot be reached is skipped for
// the next few seconds and the image goes to another; with none left the request gets 503.
// Every encoder must report the same placeholder, token count, embedding size and weights
// identity; the identity is mixed into each image's hash, so KV and embeddings made by another
// tower are never reused.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/vision/image_encoder.h"

namespace deepinfer::serve {

class RemoteImageEncoder : public vision::ImageEncoder {
 public:
  // Asks every URL for its info (at least one must answer; those that answer must agree).
  static Result<std::unique_ptr<RemoteImageEncoder>> create(const std::vector<std::string>& urls);
  const vision::ImageEncoderInfo& info() const override { return info_; }
  Result<std::vector<float>> encode(std::string_view bytes) override;

 private:
  struct Endpoint {
    std::string host;
    int port = 0;
    std::chrono::steady_clock::time_point down_until{};
  };
  RemoteImageEncoder() = default;
  vision::ImageEncoderInfo info_;
  std::mutex mu_;
  std::vector<Endpoint> endpoints_;
  size_t next_ = 0;
};

}  // namespace deepinfer::serve
