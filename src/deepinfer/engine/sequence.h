// One request as the scheduler sees it: tokens so far, how many have KV in the cache, its
// block table and its lifecycle. Sampling settings stay with the engine, found by request_key.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/engine/block_hash.h"
#include "deepinfer/engine/prompt_images.h"
#include "deepinfer/kvstore/traffic_class.h"

namespace deepinfer::engine {

enum class SeqStatus { kWaiting, kRunning, kPreempted, kFinished };
// kGrammarDeadEnd: the request's grammar allowed no token at all (not even EOS), so its text
// is not a complete answer; it ends with an error, never as kStop.
enum class FinishReason { kNone, kStop, kLength, kAbort, kGrammarDeadEnd };
// Where a waiting sequence stands with the lower KV tier's background read of its prefix.
enum class TierPrefetch { kNotStarted, kLoading, kReady };

std::string_view to_string(SeqStatus s);
std::string_view to_string(FinishReason r);

struct Sequence {
  int64_t id = 0;
  int64_t request_key = 0;  // the engine's handle for sampling params, stop strings, streams
  std::vector<int32_t> prompt;  // image positions hold image_key_token ids (prompt_images.h)
  std::shared_ptr<const std::vector<PromptImage>> images;  // null for text-only prompts
  std::vector<int32_t> output;
  int max_tokens = 16;                 // limit on output.size()
  std::vector<int32_t> eos_token_ids;  // any of these ends the sequence with kStop
  bool ignore_eos = false;
  // How long the KV store keeps this sequence's blocks (agent 3 days, chat 7 by default).
  kvstore::TrafficClass traffic_class = kvstore::TrafficClass::kChat;

  SeqStatus status = SeqStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  int64_t arrival = 0;         // order of add(); set by the scheduler
  int num_preemptions = 0;

  // KV state. num_computed_tokens counts tokens (prompt then output) whose KV is in the
  // blocks of block_table; it lags num_tokens() by one while decoding.
  int num_computed_tokens = 0;
  // Overlap scheduling: steps scheduled but not yet applied by Scheduler::update. Their tokens
  // follow num_computed_tokens; the tokens they will sample are not in `output` yet but count in
  // num_tokens() (token_at gives kPendingToken for them). Both are 0 between steps without overlap.
  int num_inflight_tokens = 0;
  int num_pending_samples = 0;
  int num_cached_tokens = -1;          // prompt tokens served by the prefix cache at first
                                       // admission (-1 until admitted), for usage reporting
  std::vector<int32_t> block_table;    // [ceil(allocated tokens / block_size)] physical ids
  int num_committed_blocks = 0;        // leading blocks of block_table that are in the radix tree
  // Hybrid caches (recent slabs): blocks block_table[recent_from_block..] are pinned, their
  // recent rows still read by the next step (those within recent_tokens of the computed end).
  int recent_from_block = 0;
  // Hybrid caches, swa_restore "bounded": a prefix hit whose last recent rows are gone is
  // restored by replaying its last recent_tokens tokens (positions [replay_start, replay_end))
  // into private copies of its last blocks, the window cut at replay_start. The state from
  // block cache_limit_block on is then approximate: it never enters the prefix cache or tier.
  bool allow_bounded_replay = false;
  int replay_start = 0;
  int replay_end = 0;
  int cache_limit_block = std::numeric_limits<int>::max();
  int num_replayed_tokens = 0;  // tokens replayed over the sequence's admissions (usage)
  // Hybrid caches, swa_restore "bounded", a model with a decoder-side saving
  // (KvCacheConfig::saving_window > 0), no prompt logprobs: set at admission when the tokens to
  // compute start before the span's last saving_window ones. The model's tail layers then run
  // only over positions [tail_from, tail_end) of the span [.., tail_end) admitted, their window
  // cut at tail_from (ForwardBatch::seq_tail_from). Its recent rows are then approximate: they
  // never stay with a cached block (the paged state, exact, is cached once out of the step's
  // reach) and no checkpoint is taken. -1: no saving.
  int tail_from = -1;
  int tail_end = 0;
  // Sliding-window checkpoints handed to the lower tier (KvCacheManager::save_checkpoint): one at
  // the prompt's end once computed, one at the sequence's end when it finishes.
  bool prompt_checkpointed = false;
  int checkpoint_end_block = 0;  // the last one's end (full blocks), 0 = none
  std::vector<BlockHash> block_hashes;  // hashes of the leading full blocks of the tokens (a cache;
                                       // depends only on the tokens, so survives preemption)
  std::vector<std::array<uint8_t, 32>> tier_keys;  // the lower tier's keys of the same blocks
                                                   // (its cache, same lifetime as block_hashes)
  TierPrefetch tier_prefetch = TierPrefetch::kNotStarted;  // reset whenever blocks are freed
  bool skip_tier = false;  // the lower tier timed out reading its prefix: compute it instead
  bool skip_prefix_cache = false;  // compute every token (prompt logprobs need their logits)
  // Prefill/decode disaggregation (GenerationRequest::kv_export_tag): once its prompt is
  // computed, its full prompt blocks go to the engine's KvExportSink under this tag, once.
  std::string kv_export_tag;
  bool kv_exported = false;
  int kv_layer_exported_blocks = -1;  // >= 0: its blocks went layer by layer (this many)
  // Speculative decoding: tokens proposed to follow the known ones (Scheduler::set_draft); the
  // next schedule() verifies them when the sequence decodes, and clears them either way.
  std::vector<int32_t> draft;

  static constexpr int32_t kPendingToken = -1;  // a token an in-flight step is sampling

  int num_prompt_tokens() const { return static_cast<int>(prompt.size()); }
  int num_known_tokens() const { return static_cast<int>(prompt.size() + output.size()); }
  int num_tokens() const { return num_known_tokens() + num_pending_samples; }
  // Tokens computed or being computed: where the next scheduled chunk starts.
  int num_scheduled_tokens() const { return num_computed_tokens + num_inflight_tokens; }
  int32_t token_at(int i) const {
    if (i < num_prompt_tokens()) return prompt[i];
    return i < num_known_tokens() ? output[i - num_prompt_tokens()] : kPendingToken;
  }
  bool is_finished() const { return status == SeqStatus::kFinished; }
};

}  // namespace deepinfer::engine
