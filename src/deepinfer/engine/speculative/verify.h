// Lossless verification of a sequence's drafts against the target's logits rows of one step.
//
// Every position is sampled exactly as without speculation: the same logit processing (bias,
// penalties over the history as it would be, the grammar mask after the drafts before it),
// the same Philox draw (counter = the index of the token drawn), the same logprobs. A draft is
// accepted while it equals the target's token there. For a drafter whose proposal is a point
// mass (n-gram lookup; greedy drafts), this is the speculative-sampling rule: accept d with
// probability min(1, p(d) / q(d)) = p(d), else draw from norm(max(p - q, 0)) = p without d;
// drawing x ~ p and accepting iff x == d does both with one uniform. So a seed's output is
// the same token for token with and without speculation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deepinfer/engine/runner_io.h"

namespace deepinfer::engine::speculative {

// `logits`: [num_rows * vocab], the row before the first draft and one per draft after it
// (num_rows >= row.draft.tokens.size() + 1). The returned row's `accepted` holds the accepted
// drafts; `token` is the target's token at the first rejected position, or the bonus token
// after the last draft. A non-finite logits row sets `error` (and nothing is accepted).
SampledRow verify_drafts(const float* logits, int32_t vocab, size_t num_rows, const SamplingRow& row);

}  // namespace deepinfer::engine::speculative
