// A grammar bound to a vocabulary, plus the per-parser-state token classification that makes
// masks cheap: for each top-of-stack context, tokens accepted or rejected regardless of what
// lies deeper in the stack are stored as a bitmask; only the rest are checked at run time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/grammar/grammar_ir.h"
#include "deepinfer/engine/grammar/token_vocabulary.h"

namespace deepinfer::engine::grammar {

// How many stack frames (from the top) key a precomputed token classification.
inline constexpr int kContextFrames = 4;
using ContextKey = std::array<uint32_t, kContextFrames>;

struct TokenClasses {
  std::vector<uint32_t> accepted;   // [mask_words] valid whatever the deeper stack holds
  std::vector<int32_t> uncertain;   // depend on the deeper stack: checked per step
};

class CompiledGrammar {
 public:
  static Result<std::shared_ptr<const CompiledGrammar>> create(
      Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab);

  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  bool is_eos(int32_t id) const;
  size_t memory_bytes() const;

  // Lazily computed (once per key, thread-safe) classification for a top-of-stack context.
  const TokenClasses& classes(const ContextKey& key) const;

 private:
  CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocabulary> v);
  std::unique_ptr<TokenClasses> compute(const ContextKey& key) const;

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  struct VocabIndex;  // sorted token order, shared by every grammar over one vocabulary
  static std::shared_ptr<const VocabIndex> index_for(const std::shared_ptr<const TokenVocabulary>& v);
  std::shared_ptr<const VocabIndex> index_;
  mutable std::mutex mu_;
  mutable std::map<ContextKey, std::unique_ptr<TokenClasses>> cache_;
};

}  // namespace deepinfer::engine::grammar
