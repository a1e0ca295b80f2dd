// See instance_text.h.
#include "deepinfer/structured/json_schema/instance_text.h"

#include <map>

namespace deepinfer::structured {
namespace {
using Json = nlohmann::ordered_json;

// Every property name's first position in any `properties` map of the schema.
void collect_order(const Json& s, std::map<std::string, size_t>& order, int depth) {
  if (depth > 64) return;
  if (s.is_object()) {
    auto it = s.find("properties");
    if (it != s.end() && it->is_object())
      for (const auto& [k, v] : it->items()) order.emplace(k, order.size());
    auto req = s.find("required");
    if (req != s.end() && req->is_array())
      for (const auto& r : *req) if (r.is_string()) order.emplace(r.get<std::string>(), order.size());
    for (const auto& [k, v] : s.items()) collect_order(v, order, depth + 1);
  } else if (s.is_array()) {
    for (const auto& v : s) collect_order(v, order, depth + 1);
  }
}

Json reorder(const Json& v, const std::map<std::string, size_t>& order) {
  if (v.is_array()) {
    Json out = Json::array();
    for (const auto& x : v) out.push_back(reorder(x, order));
    return out;
  }
  if (!v.is_object()) return v;
  std::vector<std::pair<size_t, std::string>> keys;
  size_t unknown = order.size();
  for (const auto& [k, x] : v.items()) {
    auto it = order.find(k);
    keys.emplace_back(it == order.end() ? unknown++ : it->second, k);
  }
  std::stable_sort(keys.begin(), keys.end());
  Json out = Json::object();
  for (const auto& [pos, k] : keys) out[k] = reorder(v[k], order);
  return out;
}
}  // namespace

std::string instance_text(const Json& schema, const Json& instance) {
  std::map<std::string, size_t> order;
  collect_order(schema, order, 0);
  return reorder(instance, order).dump();
}

GreedyTokenizer::GreedyTokenizer(const TokenVocabulary& v) {
  for (int32_t id = 0; id < v.size(); ++id) {
    if (v.token_bytes[id].empty() || (!v.is_special.empty() && v.is_special[id])) continue;
    index_.emplace(v.token_bytes[id], id);
    max_len_ = std::max(max_len_, v.token_bytes[id].size());
  }
}

std::vector<int32_t> GreedyTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = std::min(max_len_, text.size() - i);
    for (; n > 0; --n) {
      auto it = index_.find(text.substr(i, n));
      if (it != index_.end()) {
        out.push_back(it->second);
        break;
      }
    }
    if (n == 0) return {};
    i += n;
  }
  return out;
}

}  // namespace deepinfer::structured
