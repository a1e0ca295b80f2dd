// Public entry points of the JSON Schema compiler; the lowering lives in
// json_schema_lowering.h (structure, combinators, $ref) and json_schema_types.cc (types).
#include "deepinfer/engine/grammar/json_schema_compiler.h"

#include "deepinfer/engine/grammar/code_point_dfa.h"
#include "deepinfer/engine/grammar/json_schema_lowering.h"

namespace deepinfer::engine::grammar {

Result<Grammar> compile_json_schema(std::string_view schema, const JsonSchemaOptions& opts,
                                    const GrammarLimits& limits) {
  detail::Json root;
  try {
    root = detail::Json::parse(schema);
  } catch (const std::exception& e) {
    return invalid_argument("json schema: not valid JSON: {}", e.what());
  }
  PatternDfaMemo patterns;  // a patternProperties key is matched at every name it governs
  detail::SchemaCompiler c(root, opts, limits);
  return c.run();
}

Result<Grammar> compile_any_json(const JsonSchemaOptions& opts, const GrammarLimits& limits) {
  detail::Json root = true;
  detail::SchemaCompiler c(root, opts, limits);
  return c.run_any();
}

}  // namespace deepinfer::engine::grammar
