// Loading a draft model for `--speculative draft --draft-model M`: its weights and tokenizer,
// refused with one line naming both models when its vocabulary is not the target's (the
// drafts would be other tokens than the ids mean to the target).
#pragma once

#include <memory>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/model/model.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::engine::speculative {

// Same token count and the same bytes for every token id. `*_path` name the models in errors.
Status check_same_vocabulary(const recipe::Tokenizer& target, const std::string& target_path,
                             const recipe::Tokenizer& draft, const std::string& draft_path);

// `draft_arg`: a .gguf file, a Hugging Face directory or a catalogue name. Errors (missing or
// unreadable file, other vocabulary) name the file; none is a usage error (exit status 1).
Result<std::shared_ptr<model::Model>> load_draft_model(const std::string& draft_arg,
                                                       const recipe::Tokenizer& target,
                                                       const std::string& target_path);

}  // namespace deepinfer::engine::speculative
