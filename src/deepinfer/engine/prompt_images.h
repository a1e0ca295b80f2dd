// The images of a multimodal prompt as the engine carries them: each image's prompt positions
// and the input embeddings of those positions (computed by vision/ before the request arrives),
// plus its content hash. Plain data shared by GenerationRequest, Sequence and the runner.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::engine {

struct PromptImage {
  int32_t start = 0;   // first prompt position of the image's placeholder tokens
  int32_t length = 0;  // how many placeholder tokens
  std::array<uint64_t, 2> hash{};  // content hash of the image (the embedding cache's key)
  std::shared_ptr<const std::vector<float>> embeddings;  // [length * hidden_size]
};

// What the prompt holds at position k of an image instead of the placeholder id: an id outside
// every vocabulary (>= 2^30) derived from the image hash, so nothing keyed by prompt tokens can
// confuse it with text. KV safety does not rest on these 30 bits: the key of every block that
// holds image positions also covers each such image's full 128-bit hash and span
// (image_block_keys.h), so blocks through an image are shared only by the same image bytes at
// the same place.
inline int32_t image_key_token(const PromptImage& img, int k) {
  uint64_t x = img.hash[0] ^ (img.hash[1] * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(k) * 0xD6E8FEB86659FD93ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<int32_t>((1u << 30) | static_cast<uint32_t>(x & ((1u << 30) - 1)));
}

struct Sequence;

// Checks `images` against the prompt of `seq` (in range, in order, not overlapping, embeddings
// of hidden_size floats per position) and attaches them: seq.images is set and the image
// positions of seq.prompt become image_key_token ids. Bad spans are invalid-argument errors.
Status attach_images(const std::vector<PromptImage>& images, int64_t hidden_size, Sequence& seq);

}  // namespace deepinfer::engine
