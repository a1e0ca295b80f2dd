// A JSON Schema validator for single instances, used to decide every keyword on the finite
// value sets of `enum` / `const` (an enum next to `not`, `pattern`, `multipleOf`, object
// keywords, ...). Three-valued: a keyword it does not implement makes the verdict unknown,
// and the compiler then refuses rather than guess.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deepinfer/structured/automata/code_point_dfa.h"

namespace deepinfer::structured {

enum class Verdict { kValid, kInvalid, kUnknown };

// The type names `schema` allows ("type" as a string or a list); all six when it names none.
std::vector<std::string> declared_types(const nlohmann::ordered_json& schema);
// Whether `value` is of JSON Schema type `type` ("integer": a number without a fraction).
bool value_has_type(const nlohmann::ordered_json& value, const std::string& type);

class InstanceValidator {
 public:
  using Json = nlohmann::ordered_json;
  // `root` resolves local $ref; formats are checked only when enforce_formats (as compiled).
  // `patterns`: the compile's pattern automata when a compile asks (may be null).
  InstanceValidator(const Json& root, bool enforce_formats, PatternDfaMemo* patterns = nullptr)
      : root_(root), enforce_formats_(enforce_formats), patterns_(patterns) {}

  Verdict validate(const Json& schema, const Json& instance);

 private:
  Verdict check(const Json& s, const Json& v, int depth);
  Verdict check_number(const Json& s, const Json& v);
  Verdict check_string(const Json& s, const Json& v);
  Verdict check_array(const Json& s, const Json& v, int depth);
  Verdict check_object(const Json& s, const Json& v, int depth);
  // Search-semantics match of a regex; kUnknown when the regex is not supported.
  Verdict matches(const std::string& pattern, const std::string& text, bool search);

  const Json& root_;
  bool enforce_formats_;
  PatternDfaMemo* patterns_;
  std::map<std::pair<std::string, bool>, std::optional<CodePointDfa>> regex_cache_;
};

}  // namespace deepinfer::structured
