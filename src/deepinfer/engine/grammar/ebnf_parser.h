// GBNF-style EBNF (the llama.cpp grammar dialect) parsed into the grammar IR. The syntax is
// documented in docs/structured_outputs.md; the start rule is `root`.
#pragma once

#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/grammar/grammar_ir.h"

namespace deepinfer::engine::grammar {

Result<Grammar> compile_ebnf(std::string_view source, const GrammarLimits& limits = {});

}  // namespace deepinfer::engine::grammar
