// DeepSeek-V4.1 loader (config, Engram hash layout, weights) and the layer loop:
// [Engram] -> mHC site (collapse with the previous pre) -> attention -> mHC post -> mHC site ->
// MoE -> mHC post; then the head's collapse with the last FFN site's pre, the final norm, the head.
#include "deepinfer/model/deepseek_v41.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "deepinfer/base/check.h"
#include "deepinfer/kernels/cpu/embedding.h"  // check_token_ids
#include "deepinfer/model/architectures.h"
#include "deepinfer/model/deepseek_v41_engram.h"
#include "deepinfer/model/deepseek_v41_state.h"
#include "deepinfer/model/deepseek_v4_batch_check.h"
#include "deepinfer/model/layers/embedding.h"

namespace deepinfer::model {
namespace {

ModelConfig engine_config(const ModelConfig& base, const DeepseekV41Config& c) {
  ModelConfig m = base;
  m.architecture = "deepseek_v41";
  m.vocab_size = c.vocab_size;
  m.hidden_size = c.hidden;
  m.num_layers = c.num_layers;
  m.num_heads = c.n_heads;
  m.num_kv_heads = 1;
  m.head_dim = c.head_dim;
  m.rope_dim = c.rope_dim;
  m.max_position = c.max_position;
  m.rms_norm_eps = c.rms_eps;
  m.n_routed_experts = c.n_experts;
  m.num_experts_per_tok = c.top_k;
  m.moe_intermediate_size = c.moe_inter;
  m.q_lora_rank = c.q_lora_rank;
  m.num_nextn_predict_layers = 0;  // the DSpark draft is not loaded
  return m;
}

// What the attention assumes of the roles beyond the config's own checks: an index source's KV
// source makes index keys, and a layer selecting within the candidate blocks reads the entries
// they were chosen from.
Status check_roles(const DeepseekV41Config& c, const std::string& dir) {
  for (int l = 0; l < c.num_layers; ++l) {
    const V41Layer& L = c.layers[l];
    if (L.runs_indexer && !c.layers[L.kv_source].runs_indexer)
      return unsupported(
          "{}: index source {} reads KV source {}, which makes no index keys "
          "(not an index source)",
          dir, l, L.kv_source);
    if (L.uses_candidates && c.layers[c.candidate_source].kv_source != L.kv_source)
      return unsupported(
          "{}: layer {} selects within the candidate blocks of layer {}, which "
          "reads another KV source ({}, not {})",
          dir, l, c.candidate_source, c.layers[c.candidate_source].kv_source, L.kv_source);
  }
  return Status::ok();
}

}  // namespace

DeepseekV41::DeepseekV41(ModelConfig config, DeepseekV41Config v41, EngramHashLayout layout,
                         V41Weights w)
    : config_(std::move(config)),
      v41_(std::move(v41)),
      layout_(std::move(layout)),
      w_(std::move(w)) {
  spec_ = v41_kv_cache_spec(v41_);
  if (!v41_.engram.layers.empty()) spec_.token_history = v41_.engram.max_ngram - 1;
  hc_ = v41_hc_dims(v41_);
  moe_.n_experts = v41_.n_experts;
  moe_.top_k = v41_.top_k;
  moe_.routed_scaling = v41_.routed_scaling;
  moe_.swiglu_limit = v41_.swiglu_limit;
  moe_.hidden = v41_.hidden;
  moe_.gate_temp = v41_.gate_temp;
  for (const V41LayerWeights& L : w_.layers) {
    attn_sites_.push_back({L.hc_attn, L.attn_norm});
    ffn_sites_.push_back({L.hc_ffn, L.ffn_norm});
  }
  counts_.assign(v41_.num_layers, std::vector<uint64_t>(v41_.n_experts, 0));
  rows_.resize(layout_.layers.size());
  first_tail_ = v41_first_tail_layer(v41_);
}

Result<std::unique_ptr<DeepseekV41>> DeepseekV41::load(const ModelConfig& config,
                                                       const WeightSource& source) {
  const std::string& dir = source.description;
  if (!source.safetensors)
    return unsupported("{}: deepseek_v41 loads from a Hugging Face safetensors directory, not GGUF",
                       dir);
  DI_ASSIGN_OR_RETURN(DeepseekV41Config v41, deepseek_v41_config_from_json(dir + "/config.json"));
  DI_RETURN_IF_ERROR(check_roles(v41, dir));
  EngramHashLayout layout;
  if (!v41.engram.layers.empty()) {
    DI_ASSIGN_OR_RETURN(layout, engram_hash_layout(v41, dir + "/engram_hash.json"));
  }
  DI_ASSIGN_OR_RETURN(V41Weights w, load_deepseek_v41_weights(v41, layout, source));
  ModelConfig mc = engine_config(config, v41);
  return std::unique_ptr<DeepseekV41>(
      new DeepseekV41(std::move(mc), std::move(v41), std::move(layout), std::move(w)));
}

Status DeepseekV41::check_batch(const ForwardBatch& b, const KvCache& cache) const {
  DI_RETURN_IF_ERROR(v4_check_hybrid_batch(spec_, v41_.vocab_size, "deepseek_v41", b, cache));
  if (!b.embed_rows.empty())
    return unsupported(
        "deepseek_v41: image rows are not supported (the vision tower is not "
        "loaded)");
  if (!b.seq_tail_from.empty()) {
    if (b.seq_tail_from.size() != size_t(b.num_seqs()))
      return invalid_argument("deepseek_v41: {} tail starts for {} sequences",
                              b.seq_tail_from.size(), b.num_seqs());
    for (const int32_t row : b.logits_rows) {
      if (row < 0 || row >= b.num_tokens()) continue;  // forward's own check names it
      const int s = static_cast<int>(
          std::upper_bound(b.seq_token_start.begin(), b.seq_token_start.end(), row) -
          b.seq_token_start.begin() - 1);
      if (b.positions[row] < b.seq_tail_from[s])
        return invalid_argument(
            "deepseek_v41: sequence {} wants logits at position {}, before its tail "
            "layers' start {} (ForwardBatch::seq_tail_from)",
            s, b.positions[row], b.seq_tail_from[s]);
    }
  }
  const int k = spec_.token_history;
  if (k == 0) return Status::ok();
  if (b.seq_token_history.empty()) {
    for (int s = 0; s < b.num_seqs(); ++s)
      if (b.positions[b.seq_token_start[s]] != 0)
        return invalid_argument(
            "deepseek_v41: sequence {} continues at position {} without its "
            "last {} token ids (ForwardBatch::seq_token_history), which "
            "Engram reads",
            s, b.positions[b.seq_token_start[s]], k);
    return Status::ok();
  }
  if (b.seq_token_history.size() != size_t(b.num_seqs()) * k)
    return invalid_argument(
        "deepseek_v41: the batch has {} history token ids for {} sequences "
        "of {}",
        b.seq_token_history.size(), b.num_seqs(), k);
  for (int s = 0; s < b.num_seqs(); ++s)
    for (int i = 0; i < k; ++i) {
      const int32_t id = b.seq_token_history[size_t(s) * k + i];
      const int64_t pos = int64_t{b.positions[b.seq_token_start[s]]} - k + i;
      if ((pos < 0) != (id < 0) || id >= v41_.vocab_size)
        return invalid_argument("deepseek_v41: sequence {}'s history id {} at position {}", s, id,
                                pos);
    }
  return Status::ok();
}

void DeepseekV41::engram_rows(const ForwardBatch& b) {
  const int k = spec_.token_history, n_cols = layout_.n_cols;
  const int64_t T = b.num_tokens();
  std::vector<int32_t> ids;  // a sequence's known history, then its new tokens
  for (size_t i = 0; i < layout_.layers.size(); ++i) rows_[i].resize(T * n_cols);
  for (int s = 0; s < b.num_seqs(); ++s) {
    ids.clear();
    if (!b.seq_token_history.empty())
      for (int i = 0; i < k; ++i)
        if (const int32_t id = b.seq_token_history[size_t(s) * k + i]; id >= 0) ids.push_back(id);
    const int64_t known = static_cast<int64_t>(ids.size()), t0 = b.seq_token_start[s];
    ids.insert(ids.end(), b.token_ids.begin() + t0, b.token_ids.begin() + b.seq_token_start[s + 1]);
    for (int64_t j = known; j < static_cast<int64_t>(ids.size()); ++j) {
      const int64_t from = std::max<int64_t>(0, j + 1 - layout_.max_ngram);
      const std::span<const int32_t> recent(ids.data() + from, j + 1 - from);
      const int64_t t = t0 + j - known;
      for (size_t i = 0; i < layout_.layers.size(); ++i)
        engram_rows_at(layout_, layout_.layers[i], recent,
                       std::span<int64_t>(rows_[i].data() + t * n_cols, n_cols));
    }
  }
}

void DeepseekV41::layer_forward(int l, const ForwardBatch& b, KvCache& cache, ForwardContext& ctx) {
  const int64_t T = b.num_tokens();
  const V41LayerWeights& L = w_.layers[l];
  if (L.has_engram)
    for (size_t i = 0; i < layout_.layers.size(); ++i)
      if (layout_.layers[i].layer == l)
        v41_engram_update(v41_, layout_, L.engram, rows_[i], T, x_.data(), ctx);
  // Attention sublayer: its input collapses with the previous site's pre.
  v41_hc_site(hc_, attn_sites_[l], x_.data(), T, pre_.data(), site_pre_.data(), normed_.data(),
              hc_scratch_, ctx);
  const int src = v41_.layers[l].kv_source < 0 ? l : v41_.layers[l].kv_source;
  const V4LayerCache own{cache.block_state[l].data(), cache.recent[l].data(), cache.block_size,
                         v41_state_layout(v41_, l, cache.block_size)};
  const V4LayerCache source{cache.block_state[src].data(), cache.recent[src].data(),
                            cache.block_size, v41_state_layout(v41_, src, cache.block_size)};
  v41_attention_forward(v41_, l, L.attn, b, normed_.data(), own, source, picks_, attn_scratch_, ctx,
                        out_.data());
  v4_hc_post(hc_, hc_scratch_, out_.data(), T, x_.data());
  // MoE sublayer: its input collapses with the attention site's pre; its pre is the next one's.
  v41_hc_site(hc_, ffn_sites_[l], x_.data(), T, site_pre_.data(), pre_.data(), normed_.data(),
              hc_scratch_, ctx);
  v4_moe_forward(moe_, L.moe, normed_.data(), b.token_ids.data(), T, out_.data(), counts_[l].data(),
                 moe_scratch_, ctx);
  v4_hc_post(hc_, hc_scratch_, out_.data(), T, x_.data());
}

void DeepseekV41::keep_tail_tokens(const ForwardBatch& b) {
  const int64_t T = b.num_tokens();
  keep_.clear();
  ForwardBatch& t = tail_;
  t = ForwardBatch{};
  t.seq_token_start.push_back(0);
  t.block_table_indptr.push_back(0);
  std::vector<int64_t> new_row(T, -1);
  for (int s = 0; s < b.num_seqs(); ++s) {
    const int32_t from = b.seq_tail_from.empty() ? -1 : b.seq_tail_from[s];
    const size_t before = keep_.size();
    for (int64_t i = b.seq_token_start[s]; i < b.seq_token_start[s + 1]; ++i)
      if (b.positions[i] >= from) {
        new_row[i] = static_cast<int64_t>(keep_.size());
        keep_.push_back(i);
        t.token_ids.push_back(b.token_ids[i]);
        t.positions.push_back(b.positions[i]);
      }
    if (keep_.size() == before) continue;  // the sequence's tail layers skip this step
    t.seq_token_start.push_back(static_cast<int32_t>(keep_.size()));
    t.seq_context_len.push_back(b.seq_context_len[s]);
    t.block_table.insert(t.block_table.end(), b.block_table.begin() + b.block_table_indptr[s],
                         b.block_table.begin() + b.block_table_indptr[s + 1]);
    t.recent_slab_table.insert(t.recent_slab_table.end(),
                               b.recent_slab_table.begin() + b.block_table_indptr[s],
                               b.recent_slab_table.begin() + b.block_table_indptr[s + 1]);
    t.block_table_indptr.push_back(static_cast<int32_t>(t.block_table.size()));
    const int32_t replay_start = b.seq_replay_start.empty() ? 0 : b.seq_replay_start[s];
    t.seq_replay_start.push_back(std::max(replay_start, from));
    t.seq_replay_end.push_back(b.seq_replay_end.empty() ? 0 : b.seq_replay_end[s]);
  }
  for (const int32_t row : b.logits_rows) {
    DI_CHECK(row >= 0 && row < T && new_row[row] >= 0, "logits row {} not computed by layer {}",
             row, first_tail_);
    t.logits_rows.push_back(static_cast<int32_t>(new_row[row]));
  }
  // Compact in place: keep_ is ascending, so every row moves down (or stays).
  const int64_t K = static_cast<int64_t>(keep_.size()), H = v41_.hidden, hc = v41_.hc_mult;
  auto compact = [&](auto* data, int64_t width) {
    for (int64_t i = 0; i < K; ++i)
      if (keep_[i] != i)
        std::memmove(data + i * width, data + keep_[i] * width, sizeof(*data) * width);
  };
  compact(x_.data(), hc * H);
  compact(pre_.data(), hc);
  for (size_t i = 0; i < layout_.layers.size(); ++i)
    if (layout_.layers[i].layer >= first_tail_) compact(rows_[i].data(), layout_.n_cols);
  if (picks_.topk_layer >= 0) {
    compact(picks_.topk.data(), v41_.index_topk);
    compact(picks_.n_topk.data(), 1);
    picks_.topk.resize(K * v41_.index_topk);
    picks_.n_topk.resize(K);
  }
  if (picks_.candidate_layer >= 0) {
    int64_t at = 0;
    for (int64_t i = 0; i < K; ++i) {
      const int64_t from = picks_.cand_indptr[keep_[i]], n = picks_.cand_indptr[keep_[i] + 1] - from;
      std::memmove(picks_.candidates.data() + at, picks_.candidates.data() + from, n);
      picks_.cand_indptr[i] = at;
      at += n;
    }
    picks_.cand_indptr[K] = at;
    picks_.cand_indptr.resize(K + 1);
    picks_.candidates.resize(at);
  }
}

Status DeepseekV41::forward(const ForwardBatch& b, KvCache& cache, ForwardContext& ctx,
                            float* logits) {
  DI_RETURN_IF_ERROR(check_batch(b, cache));
  const int64_t T = b.num_tokens(), H = v41_.hidden, hc = v41_.hc_mult;
  x_.resize(T * hc * H);
  pre_.resize(T * hc);
  site_pre_.resize(T * hc);
  normed_.resize(T * H);
  out_.resize(T * H);
  embed_tokens(w_.embed, H, b.token_ids.data(), T, normed_.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < hc; ++i)
      std::memcpy(x_.data() + (t * hc + i) * H, normed_.data() + t * H, sizeof(float) * H);
  v41_first_pre(static_cast<int>(hc), T, pre_.data());
  engram_rows(b);
  v41_picks_reset(picks_);
  // Decoder-side saving: the tail layers over the kept tokens only (none: they skip the step).
  const bool saving = !b.seq_tail_from.empty() && first_tail_ < v41_.num_layers;
  const int stop = saving ? first_tail_ : v41_.num_layers;
  for (int l = 0; l < stop; ++l) layer_forward(l, b, cache, ctx);
  layer_tokens_ += T * stop;
  const ForwardBatch* kept = &b;
  if (saving) {
    keep_tail_tokens(b);
    kept = &tail_;
    const int64_t K = kept->num_tokens();
    if (K > 0)
      for (int l = first_tail_; l < v41_.num_layers; ++l) layer_forward(l, *kept, cache, ctx);
    layer_tokens_ += K * (v41_.num_layers - first_tail_);
  }
  return head(*kept, logits, ctx);
}

Status DeepseekV41::head(const ForwardBatch& b, float* logits, ForwardContext& ctx) {
  const int64_t T = b.num_tokens(), H = v41_.hidden, hc = v41_.hc_mult;
  const int64_t R = static_cast<int64_t>(b.logits_rows.size());
  rows_x_.resize(R * hc * H);
  rows_pre_.resize(R * hc);
  for (int64_t r = 0; r < R; ++r) {
    const int32_t row = b.logits_rows[r];
    DI_CHECK(row >= 0 && row < T, "logits row {} outside batch of {}", row, T);
    std::memcpy(rows_x_.data() + r * hc * H, x_.data() + int64_t{row} * hc * H,
                sizeof(float) * hc * H);
    std::memcpy(rows_pre_.data() + r * hc, pre_.data() + int64_t{row} * hc, sizeof(float) * hc);
  }
  std::vector<float> head_in(R * H);
  v41_hc_head(hc_, w_.norm, rows_x_.data(), R, rows_pre_.data(), head_in.data());
  linear_forward(w_.head, head_in.data(), R, H, logits, v41_.vocab_size, ctx);
  return Status::ok();
}

Result<std::unique_ptr<Model>> load_deepseek_v41(const ModelConfig& config,
                                                 const WeightSource& source) {
  // Every refusal names the model kind, whatever part of the checkpoint it is about.
  Result<std::unique_ptr<DeepseekV41>> m = DeepseekV41::load(config, source);
  if (!m.is_ok())
    return Status(m.status().code(),
                  "DeepSeek-V4.1 (model_type deepseek_v41): " + m.status().message());
  return std::unique_ptr<Model>(std::move(m).value());
}

}  // namespace deepinfer::model
