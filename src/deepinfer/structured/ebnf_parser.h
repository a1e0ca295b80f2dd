// GBNF-style EBNF (the llama.cpp grammar dialect) parsed into the grammar IR. The syntax is
// documented in docs/structured_outputs.md; the start rule is `root`.
#pragma once

#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/structured/grammar_ir.h"

namespace deepinfer::structured {

Result<Grammar> compile_ebnf(std::string_view source, const GrammarLimits& limits = {});

}  // namespace deepinfer::structured
