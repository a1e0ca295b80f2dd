// The MTP drafter (`--speculative mtp`): the target's own multi-token-prediction head
// (model/mtp_head.h, DeepSeek-V3's) proposes k tokens greedily per sequence. Its first draft
// comes from the target's final hidden state at the last computed position and the sequence's
// last token; each further draft chains the MTP layer's own output hidden state and the draft
// before it. It keeps its own paged KV for the one MTP layer, fed with the target's hidden
// states as the target computes them (target_computed); the KV of chained drafts is rewritten
// by the next call's catch-up, so rejected drafts leave nothing behind.
#pragma once

#include <memory>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/speculative/draft_model_drafter.h"

namespace deepinfer::engine::speculative {

// `target`: the target model (owned by the runner, which outlives the drafter). Refused with one
// line when it has no MTP head or this checkpoint lacks the MTP layer (a property of the model
// file: StatusCode::kUnsupported, exit status 1).
Result<std::unique_ptr<Drafter>> make_mtp_drafter(model::Model& target, const DraftTarget& options);

}  // namespace deepinfer::engine::speculative
