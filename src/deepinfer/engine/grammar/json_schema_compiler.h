// JSON Schema (draft 2020-12 subset, plus draft-04/07 spellings) compiled to the grammar IR.
// Unsupported keywords are refused with the keyword and its JSON pointer, never ignored.
#pragma once

#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/grammar/grammar_ir.h"

namespace deepinfer::engine::grammar {

struct JsonSchemaOptions {
  bool any_whitespace = true;       // allow JSON whitespace between tokens; false = compact
  bool strict_properties = false;   // absent additionalProperties means false (not true)
  bool enforce_formats = true;      // constrain known `format`s; refuse unknown ones (false:
                                    // every format is an ignored annotation)
};

Result<Grammar> compile_json_schema(std::string_view schema, const JsonSchemaOptions& opts,
                                    const GrammarLimits& limits = {});
// Any JSON value (the "json_object" response format accepts any value at the top).
Result<Grammar> compile_any_json(const JsonSchemaOptions& opts, const GrammarLimits& limits = {});

}  // namespace deepinfer::engine::grammar
