// Builds the grammar's TokenVocabulary from the engine tokenizer.
#pragma once

#include "deepinfer/structured/masks/token_vocabulary.h"

namespace deepinfer::recipe {
class Tokenizer;
}

namespace deepinfer::engine {

structured::TokenVocabulary vocabulary_from_tokenizer(const recipe::Tokenizer& tok);

}  // namespace deepinfer::engine
