// LRU host tier.
#include "deepinfer/kvstore/host_tier.h"

#include <cstring>

namespace deepinfer::kvstore {

void HostTier::erase_locked(List::iterator it) {
  bytes_ -= it->value->size();
  index_.erase(it->key);
  lru_.erase(it);
}

void HostTier::put(const BlockKey& key, BlockBytes value, int64_t ttl_seconds, int64_t now) {
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) erase_locked(it->second);
  if (!value || value->size() > capacity_) return;
  while (bytes_ + value->size() > capacity_ && !lru_.empty()) {
    erase_locked(std::prev(lru_.end()));
    ++evictions_;
  }
  bytes_ += value->size();
  lru_.push_front(Entry{key, std::move(value), ttl_seconds, now + ttl_seconds});
  index_[key] = lru_.begin();
}

bool HostTier::get(const BlockKey& key, uint8_t* dst, size_t dst_bytes, int64_t now) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  if (it->second->expiry <= now) {
    erase_locked(it->second);
    return false;
  }
  if (it->second->value->size() != dst_bytes) return false;
  lru_.splice(lru_.begin(), lru_, it->second);
  Entry& e = lru_.front();
  e.expiry = now + e.ttl;
  std::memcpy(dst, e.value->data(), dst_bytes);
  return true;
}

bool HostTier::contains(const BlockKey& key, int64_t now) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  if (it->second->expiry <= now) {
    erase_locked(it->second);
    return false;
  }
  return true;
}

void HostTier::erase(const BlockKey& key) {
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) erase_locked(it->second);
}

size_t HostTier::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}
size_t HostTier::entries() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}
uint64_t HostTier::evictions() const {
  std::lock_guard lock(mu_);
  return evictions_;
}

}  // namespace deepinfer::kvstore
