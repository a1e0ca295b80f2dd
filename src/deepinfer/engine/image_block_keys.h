// What a KV block's key covers besides its token ids when the block holds image positions: the
// image's content hash (the embedding cache's key, SHA-256 of the encoded bytes) and its span.
// The prefix cache (block_hash.h) and the KV store tier (kvstore/key.h) both mix these words into
// their chain, so two different images at the same place never share a block, and the same
// image bytes at the same place in a later turn do (as vLLM's multimodal hashes do).
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::engine {

struct Sequence;

// For each of seq.images overlapping positions [first, first + count): its hash (2 words) and
// (start << 32 | length). Empty for a block with no image positions, so text blocks keep the
// keys they have without images.
std::vector<uint64_t> image_block_extra(const Sequence& seq, int first, int count);

}  // namespace deepinfer::engine
