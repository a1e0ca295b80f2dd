// The multi-token-prediction (MTP) head a checkpoint may carry next to its main model
// (DeepSeek-V3's model.layers.{num_layers}): from the main model's final hidden state at
// position t and the token at t+1 it predicts the token at t+2, with one decoder layer of its
// own and its own KV. The MTP drafter (engine/speculative/mtp_drafter.h) reaches it through
// this interface, so it needs no architecture's class.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/forward_batch.h"
#include "deepinfer/model/kv_cache.h"

namespace deepinfer::model {

struct ForwardContext;

class MtpHead {
 public:
  virtual ~MtpHead() = default;
  // False: the architecture has an MTP head but this checkpoint was converted without it.
  virtual bool has_mtp() const = 0;
  // Width of a hidden row (final_hidden(), mtp_forward's prev_hidden and hidden_out).
  virtual int64_t mtp_hidden_size() const = 0;
  virtual KvCacheSpec mtp_kv_cache_spec() const = 0;
  // When on, every main forward() keeps each token's final hidden state (the MTP head's input):
  // final_hidden() is [batch tokens, mtp_hidden_size()] of the last forward().
  virtual void set_keep_final_hidden(bool on) = 0;
  virtual const std::vector<float>& final_hidden() const = 0;
  // `batch` holds tokens t+1 at positions t (slots in `mtp_cache`, of mtp_kv_cache_spec()),
  // prev_hidden [tokens, hidden] the hidden state at t. Fills logits [logits_rows, vocab] for
  // the token at t+2 and, when hidden_out is set, [tokens, hidden] the MTP layer's own output
  // (before its head norm): the hidden state a chained MTP step takes in place of the main
  // model's at t+1.
  virtual Status mtp_forward(const ForwardBatch& batch, const float* prev_hidden,
                             KvCache& mtp_cache, ForwardContext& ctx, float* logits,
                             float* hidden_out) = 0;
};

}  // namespace deepinfer::model
