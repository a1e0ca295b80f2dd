// Serializes a JSON instance the way our grammars expect to see it written: compact, with
// object keys in the order the schema declares them (the grammar's default key order).
// Used by the soundness tests and the mask benchmark.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/structured/masks/token_vocabulary.h"

namespace deepinfer::structured {

std::string instance_text(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& instance);

// Longest-match tokenization over the vocabulary (a legal, if not canonical, segmentation).
class GreedyTokenizer {
 public:
  explicit GreedyTokenizer(const TokenVocabulary& v);
  std::vector<int32_t> encode(const std::string& text) const;  // empty if a byte has no token

 private:
  std::unordered_map<std::string, int32_t> index_;
  size_t max_len_ = 1;
};

}  // namespace deepinfer::structured
