// A multimodal prompt: the chat template leaves one placeholder token per image; each becomes
// tokens_per_image copies (what LlavaProcessor does) whose input embeddings are the image's.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::vision {

// Image `image` occupies prompt positions [start, start + length).
struct ImageSpan {
  int32_t start = 0;
  int32_t length = 0;
  int image = 0;
};

struct ExpandedPrompt {
  std::vector<int32_t> ids;
  std::vector<ImageSpan> spans;  // in prompt order, one per image
};

// Expands every `image_token_id` in `ids` to `tokens_per_image` copies. The placeholder count
// must equal `num_images` (else an invalid-argument error saying both counts).
Result<ExpandedPrompt> expand_image_placeholders(const std::vector<int32_t>& ids, int32_t image_token_id,
                                                 int tokens_per_image, int num_images);

}  // namespace deepinfer::vision
