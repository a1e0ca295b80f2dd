// See draft_kv_blocks.h.
#include "deepinfer/engine/speculative/draft_kv_blocks.h"

#include "deepinfer/base/check.h"

namespace deepinfer::engine::speculative {

bool DraftKvBlocks::reserve(int64_t seq_id, int tokens, const std::function<void(int64_t)>& evict) {
  const size_t need = static_cast<size_t>((tokens + block_size_ - 1) / block_size_);
  for (;;) {
    Seq& s = seqs_[seq_id];
    if (s.blocks.size() >= need) return true;
    if (auto b = pool_.take_free()) {
      s.blocks.push_back(*b);
      continue;
    }
    // Evict the least recently drafted sequence that is not in this call (one that is waiting,
    // preempted or opted out); it catches up again when it next drafts.
    auto victim = seqs_.end();
    for (auto it = seqs_.begin(); it != seqs_.end(); ++it)
      if (it->first != seq_id && it->second.last_used != call_ && !it->second.blocks.empty() &&
          (victim == seqs_.end() || it->second.last_used < victim->second.last_used))
        victim = it;
    if (victim == seqs_.end()) return false;
    const int64_t id = victim->first;
    evict(id);
    DI_CHECK(seqs_.count(id) == 0, "draft KV: evicted sequence {} was not released", id);
  }
}

void DraftKvBlocks::release(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  for (int32_t b : it->second.blocks)
    if (pool_.decref(b) == 0) pool_.put_free(b);
  seqs_.erase(it);
}

std::vector<int32_t> DraftKvBlocks::table(int64_t seq_id, int tokens) const {
  const size_t n = static_cast<size_t>((tokens + block_size_ - 1) / block_size_);
  const auto it = seqs_.find(seq_id);
  DI_CHECK(it != seqs_.end() && it->second.blocks.size() >= n,
           "draft KV: sequence {} holds fewer than {} blocks", seq_id, n);
  return {it->second.blocks.begin(), it->second.blocks.begin() + static_cast<std::ptrdiff_t>(n)};
}

}  // namespace deepinfer::engine::speculative
