#include "deepinfer/vision/image_prompt.h"

#include <algorithm>

namespace deepinfer::vision {

Result<ExpandedPrompt> expand_image_placeholders(const std::vector<int32_t>& ids, int32_t image_token_id,
                                                 int tokens_per_image, int num_images) {
  const auto found = std::count(ids.begin(), ids.end(), image_token_id);
  if (found != num_images)
    return invalid_argument("the prompt has {} image placeholder(s) for {} image(s)", found, num_images);
  ExpandedPrompt out;
  out.ids.reserve(ids.size() + static_cast<size_t>(num_images) * (tokens_per_image - 1));
  for (int32_t id : ids) {
    if (id != image_token_id) {
      out.ids.push_back(id);
      continue;
    }
    out.spans.push_back({static_cast<int32_t>(out.ids.size()), tokens_per_image, static_cast<int>(out.spans.size())});
    out.ids.insert(out.ids.end(), static_cast<size_t>(tokens_per_image), image_token_id);
  }
  return out;
}

}  // namespace deepinfer::vision
