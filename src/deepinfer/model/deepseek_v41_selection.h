// DeepSeek-V4.1's choice of compressed entries at an index source, for one query: the candidate
// blocks the candidate source publishes (V4.1-Flash: layer 20 keeps its best 2048 blocks of 8
// entries) and the top-k that every index source picks (within those blocks after the candidate
// source). Layers that are not index sources reuse the latest picks unchanged.
#pragma once

#include <cstdint>
#include <span>

namespace deepinfer::model {

// keep[e] = 1 for the entries of the `topk_blocks` best blocks of `block` consecutive entries,
// a block scored by its best visible entry; the block holding the newest visible entry
// (visible - 1) is always kept; blocks with no visible entry never are. Entries >= visible are
// not visible (their scores are not read). scores, keep: [n_entries].
void v41_candidate_blocks(std::span<const float> scores, int64_t visible, int topk_blocks,
                          int block, std::span<uint8_t> keep);

// The (at most) k best visible entries (e < visible, and candidates[e] set when candidates is
// not empty), ties to the lower entry, written ascending to out[0..n); returns n.
// scores, candidates: [n_entries]; out: at least min(k, visible) entries.
int v41_select_topk(std::span<const float> scores, int64_t visible,
                    std::span<const uint8_t> candidates, int k, std::span<int32_t> out);

}  // namespace deepinfer::model
