// Classifications by context key, for CompiledGrammar's cache: open addressing with the keys
// inline, so a lookup reads one or two cache lines where a std::unordered_map reads a bucket
// and then a node (the matcher looks up every new stack's keys, often with cold caches).
// Entries are never removed and each classification stays where it was allocated, so the
// pointers handed out stay valid for the table's life. Not thread-safe: the owner locks.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "deepinfer/structured/masks/context_walker.h"

namespace deepinfer::structured {

class ContextTable {
 public:
  const TokenClasses* find(const ContextKey& key) const;
  // Keeps `classes` under `key` unless the key has one already; returns the one kept and
  // whether it is `classes`.
  std::pair<const TokenClasses*, bool> insert(const ContextKey& key,
                                              std::unique_ptr<TokenClasses> classes);
  size_t size() const { return owned_.size(); }

 private:
  struct Slot {
    ContextKey key{};
    const TokenClasses* classes = nullptr;  // null = free
  };
  size_t slot_of(const ContextKey& key) const;  // where key is, or the free slot it would take
  std::vector<Slot> slots_;                     // a power of two in size, at most half full
  std::vector<std::unique_ptr<TokenClasses>> owned_;
};

}  // namespace deepinfer::structured
