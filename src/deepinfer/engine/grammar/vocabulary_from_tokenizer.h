// Builds the grammar's TokenVocabulary from the engine tokenizer.
#pragma once

#include "deepinfer/engine/grammar/token_vocabulary.h"

namespace deepinfer::recipe {
class Tokenizer;
}

namespace deepinfer::engine::grammar {

TokenVocabulary vocabulary_from_tokenizer(const recipe::Tokenizer& tok);

}  // namespace deepinfer::engine::grammar
