// See draft_model_setup.h and draft_model_drafter.h (make_configured_draft_model_drafter).
#include "deepinfer/engine/speculative/draft_model_setup.h"

#include <algorithm>

#include "deepinfer/engine/loaded_model.h"
#include "deepinfer/engine/speculative/draft_model_drafter.h"
#include "deepinfer/engine/speculative/speculator.h"

namespace deepinfer::engine::speculative {
namespace {

std::string shown(const std::string& bytes) {
  std::string s;
  for (unsigned char c : bytes.substr(0, 24)) s += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c))
                                                                          : fmt::format("\\x{:02x}", c);
  return s;
}

}  // namespace

Status check_same_vocabulary(const recipe::Tokenizer& target, const std::string& target_path,
                             const recipe::Tokenizer& draft, const std::string& draft_path) {
  if (target.vocab_size() != draft.vocab_size())
    return unsupported("--draft-model {}: its vocabulary ({} tokens) is not the target model {}'s ({} tokens); "
                       "a draft model must share the target's tokenizer",
                       draft_path, draft.vocab_size(), target_path, target.vocab_size());
  for (int32_t id = 0; id < target.vocab_size(); ++id)
    if (target.token_bytes(id) != draft.token_bytes(id))
      return unsupported("--draft-model {}: its vocabulary differs from the target model {}'s at token {} "
                         "(\"{}\" vs \"{}\"); a draft model must share the target's tokenizer",
                         draft_path, target_path, id, shown(draft.token_bytes(id)), shown(target.token_bytes(id)));
  return Status::ok();
}

Result<std::shared_ptr<model::Model>> load_draft_model(const std::string& draft_arg, const recipe::Tokenizer& target,
                                                       const std::string& target_path) {
  Result<LoadedModel> loaded = load_model_with_tokenizer(draft_arg);
  if (!loaded.is_ok()) {
    const Status& st = loaded.status();
    // Not a usage error: the flag was given, the file is the problem (exit status 1).
    const StatusCode code = st.code() == StatusCode::kInvalidArgument ? StatusCode::kNotFound : st.code();
    const bool named = st.message().find(draft_arg) != std::string::npos;
    return Status(code, named ? "--draft-model: " + st.message()
                              : fmt::format("--draft-model {}: {}", draft_arg, st.message()));
  }
  DI_RETURN_IF_ERROR(check_same_vocabulary(target, target_path, *loaded->tokenizer, loaded->path));
  return std::shared_ptr<model::Model>(std::move(loaded->model));
}

Result<std::unique_ptr<Drafter>> make_configured_draft_model_drafter(const SpeculativeConfig& config,
                                                                     const DraftTarget& target) {
  const std::string& name = config.draft_model;
  if (!config.draft_weights)
    return invalid_argument("--speculative draft: the draft model {} is not loaded", name);
  const model::ModelConfig& dc = config.draft_weights->config();
  if (dc.vocab_size != target.config->vocab_size)
    return unsupported("--draft-model {}: its logits cover {} tokens, the target's {}; a draft model must share "
                       "the target's vocabulary",
                       name, dc.vocab_size, target.config->vocab_size);
  model::KvCacheSpec spec = config.draft_weights->kv_cache_spec();
  if (spec.hybrid())
    return unsupported("--draft-model {}: {} keeps hybrid KV state that rejected drafts would corrupt; it cannot "
                       "be a draft model yet",
                       name, dc.architecture);
  DI_ASSIGN_OR_RETURN(spec.dtype, model::resolve_kv_cache_dtype(target.kv_cache_dtype, spec, dc.architecture));
  DraftModelOptions o;
  o.block_size = target.block_size;
  const size_t block_bytes = model::KvCache::bytes_per_block(spec, target.block_size);
  // Default: as many tokens as the target's pool, plus a block per sequence for the drafts
  // beyond its known tokens.
  const int per_seq = (kMaxDraftTokens + target.block_size - 1) / target.block_size;
  o.num_blocks = config.draft_kv_cache_bytes > 0
                     ? static_cast<int>(config.draft_kv_cache_bytes / std::max<size_t>(1, block_bytes))
                     : target.num_kv_blocks + target.max_num_seqs * per_seq;
  if (o.num_blocks < 2 * per_seq)
    return invalid_argument("--draft-kv-cache-gb: {} bytes hold only {} KV blocks of the draft model {} ({} bytes "
                            "each); give it more",
                            config.draft_kv_cache_bytes, o.num_blocks, name, block_bytes);
  o.kv_dtype = spec.dtype;
  o.batch_invariant = target.batch_invariant;
  o.int8_activations = target.int8_activations;
  o.end_tokens = target.end_tokens;
  return make_draft_model_drafter(config.draft_weights, target.pool, o);
}

}  // namespace deepinfer::engine::speculative
