// JSON Schema (draft 2020-12 subset, plus draft-04/07 spellings) compiled to the grammar IR.
// Unsupported keywords are refused with the keyword and its JSON pointer, never ignored.
#pragma once

#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/structured/grammar_ir.h"

namespace deepinfer::structured {

// Objects with more declared properties than this keep schema order under any_order_keys (the
// any-order grammar has one rule per subset of properties already written).
inline constexpr int kMaxAnyOrderProperties = 8;

// Deepest nesting of arrays and objects a schema document may have (anywhere: subschemas,
// `const`/`enum` values, annotations). The walks over a schema (normalising, merging,
// lowering, validating, hashing, printing) recurse over it, so a deeper document is refused
// before any of them runs. JSONSchemaBench's deepest schema nests 63 levels.
inline constexpr int kMaxSchemaDepth = 256;

struct JsonSchemaOptions {
  bool any_whitespace = true;       // allow JSON whitespace between tokens; false = compact
  bool strict_properties = false;   // absent additionalProperties means false (not true)
  bool enforce_formats = true;      // constrain known `format`s; refuse unknown ones (false:
                                    // every format is an ignored annotation)
  bool any_order_keys = false;      // declared properties in any order (objects with up to
                                    // kMaxAnyOrderProperties of them; larger ones keep schema
                                    // order, a subset, so still sound); default: schema order
};

Result<Grammar> compile_json_schema(std::string_view schema, const JsonSchemaOptions& opts,
                                    const GrammarLimits& limits = {});
// Any JSON value (the "json_object" response format accepts any value at the top).
Result<Grammar> compile_any_json(const JsonSchemaOptions& opts, const GrammarLimits& limits = {});

}  // namespace deepinfer::structured
