// Attaching a prompt's images to its sequence.
#include "deepinfer/engine/prompt_images.h"

#include "deepinfer/engine/sequence.h"

namespace deepinfer::engine {

Status attach_images(const std::vector<PromptImage>& images, int64_t hidden_size, Sequence& seq) {
  int32_t next_free = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const PromptImage& img = images[i];
    if (img.length <= 0 || img.start < next_free || img.start + int64_t{img.length} > seq.num_prompt_tokens())
      return invalid_argument("image {}: positions [{}, {}) are out of order or outside the prompt of {} tokens", i,
                              img.start, int64_t{img.start} + img.length, seq.num_prompt_tokens());
    if (!img.embeddings || img.embeddings->size() != static_cast<size_t>(img.length) * static_cast<size_t>(hidden_size))
      return invalid_argument("image {}: {} embedding values for {} positions of {} (the model's hidden size)", i,
                              img.embeddings ? img.embeddings->size() : 0, img.length, hidden_size);
    next_free = img.start + img.length;
  }
  for (const PromptImage& img : images)
    for (int k = 0; k < img.length; ++k) seq.prompt[static_cast<size_t>(img.start + k)] = image_key_token(img, k);
  seq.images = std::make_shared<const std::vector<PromptImage>>(images);
  return Status::ok();
}

}  // namespace deepinfer::engine
