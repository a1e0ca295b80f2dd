#include "deepinfer/serve/response_store.h"

namespace deepinfer::serve {

void ResponseStore::put(const std::string& id, StoredResponse value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = items_.find(id);
  if (it != items_.end()) {
    order_.erase(it->second.second);
    items_.erase(it);
  }
  order_.push_front(id);
  items_.emplace(id, std::make_pair(std::move(value), order_.begin()));
  while (items_.size() > capacity_) {
    items_.erase(order_.back());
    order_.pop_back();
  }
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = items_.find(id);
  if (it == items_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second.second);
  return it->second.first;
}

}  // namespace deepinfer::serve
