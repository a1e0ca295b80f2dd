// Responses API objects kept in memory for `previous_response_id` and GET /v1/responses/{id}:
// the response JSON and the whole conversation up to and including its output. Bounded, LRU.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/recipe/chat.h"

namespace deepinfer::serve {

struct StoredResponse {
  nlohmann::json response;
  std::vector<recipe::ChatMessage> conversation;  // instructions excluded (not inherited)
};

class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity) : capacity_(capacity) {}
  void put(const std::string& id, StoredResponse value);
  std::optional<StoredResponse> get(const std::string& id);

 private:
  size_t capacity_;
  std::mutex mu_;
  std::list<std::string> order_;  // most recent first
  std::map<std::string, std::pair<StoredResponse, std::list<std::string>::iterator>> items_;
};

}  // namespace deepinfer::serve
