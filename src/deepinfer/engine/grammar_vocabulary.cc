// Copies raw token bytes, special flags and EOS ids out of recipe::Tokenizer.
#include "deepinfer/engine/grammar_vocabulary.h"

#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::engine {

structured::TokenVocabulary vocabulary_from_tokenizer(const recipe::Tokenizer& tok) {
  structured::TokenVocabulary v;
  const int32_t n = tok.vocab_size();
  v.token_bytes.resize(n);
  v.is_special.resize(n);
  for (int32_t id = 0; id < n; ++id) {
    v.is_special[id] = tok.is_special(id);
    if (!v.is_special[id]) v.token_bytes[id] = tok.token_bytes(id);
  }
  v.eos_ids = tok.eos_ids();
  if (v.eos_ids.empty() && tok.eos_id() >= 0) v.eos_ids.push_back(tok.eos_id());
  return v;
}

}  // namespace deepinfer::engine
