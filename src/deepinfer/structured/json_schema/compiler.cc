// Public entry points of the JSON Schema compiler: parse, depth check, then SchemaCompiler
// (schema_compiler.h) lowers the document.
#include "deepinfer/structured/json_schema/compiler.h"

#include <string_view>
#include <vector>

#include "deepinfer/structured/json_schema/schema_compiler.h"

namespace deepinfer::structured {
namespace {

// With an explicit stack (the document may be nested 100,000 deep): an error naming the
// top-level member under which the nesting passes kMaxSchemaDepth, else ok.
Status check_depth(const detail::Json& root) {
  struct Frame {
    const detail::Json* v;
    int depth;
    std::string_view top;  // the root member it lies under
  };
  std::vector<Frame> stack = {{&root, 1, {}}};
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    if (f.depth > kMaxSchemaDepth)
      return invalid_argument(
          "json schema: nested more than {} levels deep under '/{}' (arrays and objects, "
          "counting values such as const and enum)",
          kMaxSchemaDepth, f.top);
    if (f.v->is_array()) {
      for (const auto& x : *f.v)
        if (x.is_structured()) stack.push_back({&x, f.depth + 1, f.top});
    } else if (f.v->is_object()) {
      for (const auto& [k, x] : f.v->items())
        if (x.is_structured()) stack.push_back({&x, f.depth + 1, f.depth == 1 ? std::string_view(k) : f.top});
    }
  }
  return Status::ok();
}

}  // namespace

Result<Grammar> compile_json_schema(std::string_view schema, const JsonSchemaOptions& opts,
                                    const GrammarLimits& limits) {
  detail::Json root;
  try {
    root = detail::Json::parse(schema);
  } catch (const std::exception& e) {
    return invalid_argument("json schema: not valid JSON: {}", e.what());
  }
  DI_RETURN_IF_ERROR(check_depth(root));
  detail::SchemaCompiler c(root, opts, limits);
  try {
    return c.run();
  } catch (const nlohmann::json::exception& e) {
    // A keyword whose value has the wrong shape where the lowering reads into it (a $ref to
    // a string, `properties` that is not an object, ...): the schema's fault, said as such.
    return invalid_argument("json schema: a keyword's value has the wrong type: {}", e.what());
  }
}

Result<Grammar> compile_any_json(const JsonSchemaOptions& opts, const GrammarLimits& limits) {
  detail::Json root = true;
  detail::SchemaCompiler c(root, opts, limits);
  return c.run_any();
}

}  // namespace deepinfer::structured
