// See context_table.h.
#include "deepinfer/structured/masks/context_table.h"

#include <algorithm>

namespace deepinfer::structured {

size_t ContextTable::slot_of(const ContextKey& key) const {
  const size_t mask = slots_.size() - 1;
  size_t i = ContextKeyHash()(key) & mask;
  while (slots_[i].classes && slots_[i].key != key) i = (i + 1) & mask;
  return i;
}

const TokenClasses* ContextTable::find(const ContextKey& key) const {
  if (slots_.empty()) return nullptr;
  return slots_[slot_of(key)].classes;
}

std::pair<const TokenClasses*, bool> ContextTable::insert(const ContextKey& key,
                                                          std::unique_ptr<TokenClasses> classes) {
  if (slots_.size() < 2 * (owned_.size() + 1)) {  // grow and re-place every entry
    std::vector<Slot> old(std::max<size_t>(64, 2 * slots_.size()));
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.classes) slots_[slot_of(s.key)] = s;
  }
  Slot& slot = slots_[slot_of(key)];
  if (slot.classes) return {slot.classes, false};
  slot.key = key;
  slot.classes = classes.get();
  owned_.push_back(std::move(classes));
  return {slot.classes, true};
}

}  // namespace deepinfer::structured
