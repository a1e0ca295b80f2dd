#include "deepinfer/engine/image_block_keys.h"

#include "deepinfer/engine/sequence.h"

namespace deepinfer::engine {

std::vector<uint64_t> image_block_extra(const Sequence& seq, int first, int count) {
  std::vector<uint64_t> extra;
  if (!seq.images) return extra;
  const int64_t end = int64_t{first} + count;
  for (const PromptImage& img : *seq.images) {
    if (img.start >= end) break;  // images are in prompt order (attach_images checks it)
    if (int64_t{img.start} + img.length <= first) continue;
    extra.push_back(img.hash[0]);
    extra.push_back(img.hash[1]);
    extra.push_back((static_cast<uint64_t>(static_cast<uint32_t>(img.start)) << 32) |
                    static_cast<uint32_t>(img.length));
  }
  return extra;
}

}  // namespace deepinfer::engine
