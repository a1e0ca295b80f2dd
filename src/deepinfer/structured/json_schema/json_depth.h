// How deep a JSON document nests, found with an explicit stack: the walks that come after it
// (printing, copying, comparing, the schema compiler) recurse, so a document nested 100,000
// deep must be measured before any of them runs.
#pragma once

#include <utility>
#include <vector>

namespace deepinfer::structured {

// Whether `root` has arrays/objects nested more than `max_depth` levels (the root is level 1).
// Works for nlohmann::json and nlohmann::ordered_json alike.
template <typename JsonT>
bool json_nested_deeper_than(const JsonT& root, int max_depth) {
  std::vector<std::pair<const JsonT*, int>> stack = {{&root, 1}};
  while (!stack.empty()) {
    auto [v, depth] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    if (depth > max_depth) return true;
    for (const auto& x : *v)
      if (x.is_structured()) stack.push_back({&x, depth + 1});
  }
  return false;
}

}  // namespace deepinfer::structured
