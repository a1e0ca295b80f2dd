#include "deepinfer/engine/image_request.h"

#include "deepinfer/vision/image_prompt.h"

namespace deepinfer::engine {

Status add_prompt_images(vision::ImageService& service, const std::vector<const std::string*>& images,
                         GenerationRequest& request) {
  if (images.empty()) return Status::ok();
  const int n = static_cast<int>(images.size());
  if (n > service.options().max_images_per_request)
    return invalid_argument("{} images in one request; at most {} are accepted", n,
                            service.options().max_images_per_request);
  const vision::ImageEncoderInfo& enc = service.info();
  Result<vision::ExpandedPrompt> ex =
      vision::expand_image_placeholders(request.prompt_ids, enc.image_token_id, enc.tokens_per_image, n);
  if (!ex.is_ok())
    return invalid_argument("the model's chat template did not place the images: {}", ex.status().message());
  std::vector<PromptImage> out;
  for (const vision::ImageSpan& span : ex->spans) {
    Result<vision::EncodedImage> e = service.encode(*images[static_cast<size_t>(span.image)]);
    if (!e.is_ok()) {  // a bad image is the request's fault; an encoder pool out of reach is not
      if (e.status().code() == StatusCode::kResourceExhausted)
        return resource_exhausted("image {}: {}", span.image + 1, e.status().message());
      return invalid_argument("image {}: {}", span.image + 1, e.status().message());
    }
    PromptImage img;
    img.start = span.start;
    img.length = span.length;
    img.hash = e->hash;
    img.embeddings = e->embeddings;
    out.push_back(std::move(img));
  }
  request.prompt_ids = std::move(ex->ids);
  request.images = std::move(out);
  return Status::ok();
}

}  // namespace deepinfer::engine
