// See verify.h: one draw per position, as the non-speculative sampler would make it.
#include "deepinfer/engine/speculative/verify.h"

#include <cmath>
#include <vector>

#include "deepinfer/base/check.h"

namespace deepinfer::engine::speculative {
namespace {

int count_non_finite(const float* row, int32_t vocab) {
  int n = 0;
  for (int32_t i = 0; i < vocab; ++i) n += std::isfinite(row[i]) ? 0 : 1;
  return n;
}

}  // namespace

SampledRow verify_drafts(const float* logits, int32_t vocab, size_t num_rows, const SamplingRow& row) {
  const std::vector<int32_t>& drafts = row.draft.tokens;
  DI_CHECK(num_rows >= drafts.size() + 1, "{} drafts to verify with {} logits rows", drafts.size(), num_rows);
  DI_CHECK(row.draft.allowed_masks.empty() || row.draft.allowed_masks.size() == drafts.size(),
           "{} draft masks for {} drafts", row.draft.allowed_masks.size(), drafts.size());
  const bool has_history = !row.history.empty();  // penalties on: each position sees the drafts before it
  std::vector<int32_t> history = row.history;
  SampledRow out;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    const float* lg = logits + j * static_cast<size_t>(vocab);
    if (const int bad = count_non_finite(lg, vocab); bad > 0) {
      out = SampledRow{};
      out.error = fmt::format(
          "the model produced non-finite logits ({} of {} values are NaN or infinite) while verifying "
          "draft {}: the weights or the computation are broken",
          bad, vocab, j);
      return out;
    }
    const std::vector<uint32_t>* mask = j == 0 ? &row.allowed_mask
                                        : row.draft.allowed_masks.empty() ? nullptr
                                                                          : &row.draft.allowed_masks[j - 1];
    SampleResult sr = engine::sample(lg, vocab, row.params, SamplerState{history, row.num_prompt},
                                     row.request_key, row.step + j,
                                     mask == nullptr || mask->empty() ? nullptr : mask->data());
    if (j < drafts.size() && sr.token == drafts[j]) {
      SampledRow& a = out.accepted.emplace_back();
      a.token = sr.token;
      a.logprob = sr.logprob;
      a.top_logprobs = std::move(sr.top_logprobs);
      if (has_history) history.push_back(sr.token);
      continue;
    }
    out.token = sr.token;
    out.logprob = sr.logprob;
    out.top_logprobs = std::move(sr.top_logprobs);
    break;
  }
  return out;
}

}  // namespace deepinfer::engine::speculative
