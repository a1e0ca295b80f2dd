// allOf / $ref-with-siblings flattening for the JSON Schema compiler (merge.cc),
// and the disjointness test that lets oneOf be compiled as a plain union without accepting
// overlaps (disjoint.cc).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/base/status.h"

namespace deepinfer::structured {

class PatternDfaMemo;  // automata/code_point_dfa.h

class SchemaMerger {
 public:
  using Json = nlohmann::ordered_json;
  using Resolver = std::function<Result<const Json*>(const std::string& ref, const std::string& ptr)>;

  // `patterns`: the compile's pattern automata (may be null).
  explicit SchemaMerger(Resolver resolve, PatternDfaMemo* patterns = nullptr)
      : resolve_(std::move(resolve)), patterns_(patterns) {}

  // Inlines $ref (when it has sibling keywords) and folds allOf into one schema. Refuses
  // combinations whose merge would accept more than the original.
  Result<Json> flatten(const Json& s, const std::string& ptr);
  // True when no instance can match two of the schemas.
  bool pairwise_disjoint(const std::vector<Json>& schemas) const;

 private:
  Result<Json> merge(Json a, const Json& b, const std::string& ptr);
  Status merge_declared_names(Json* const sides[2], const std::string& ptr);
  Status merge_pattern_clash(Json* const sides[2], const std::string& ptr);
  Result<bool> merge_keyword(Json& a, const Json& b_ref, const std::string& k, const Json& v,
                             const std::string& ptr);
  Json inline_union_refs(const Json& s, int depth) const;
  Resolver resolve_;
  PatternDfaMemo* patterns_;
  int depth_ = 0;
  std::set<std::string> conjunctions_;  // patterns this merger made from several

};

}  // namespace deepinfer::structured
