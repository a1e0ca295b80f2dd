// Partition refinement (see dfa_partition.h): merging of identical rows, hashed Moore rounds,
// and Hopcroft's algorithm, whose blocks are ranges of one array of states (splitting a block
// moves the marked states to the front of its range, so no block is ever copied).
#include "deepinfer/structured/automata/dfa_partition.h"

#include <algorithm>
#include <map>

namespace deepinfer::structured {

namespace {

// Past this many Moore rounds the partition goes to Hopcroft (long chains of states, as in
// length counters, take one Moore round per state).
constexpr int kMaxMooreRounds = 8;

// Buffers kept across rounds (fresh large allocations each round cost page faults).
struct MooreScratch {
  std::vector<uint64_t> slots;  // [cap] (hash high bits << 32) | (representative + 1); 0 empty
  std::vector<int32_t> rep_id, refined;  // [n]
  std::vector<uint64_t> mult;            // [k + 1] hash multipliers
};

// One Moore round: states keep their block only with equal blocks of successors. Returns the
// new number of blocks; ids are dense in order of first state. The table of signatures starts
// near the previous block count and grows, so it stays in cache when few blocks are distinct.
// With `succ_ids` the successors count by their own ids instead (states with equal blocks and
// the very same successors: the row merging below).
size_t moore_round(size_t n, size_t k, const std::vector<int32_t>& next, size_t blocks,
                   std::vector<int32_t>& block, MooreScratch& scratch,
                   const std::vector<int32_t>* succ_ids = nullptr) {
  // A sum of products with one odd constant per position (independent multiplies, unlike a
  // chained hash), then mixed; equal hashes are confirmed by comparing the signatures.
  std::vector<uint64_t>& mult = scratch.mult;
  if (mult.size() != k + 1) {
    uint64_t x = 0x9E3779B97F4A7C15ull;
    mult.clear();
    for (size_t i = 0; i <= k; ++i) {
      x ^= x >> 33;
      x *= 0xFF51AFD7ED558CCDull;
      x ^= x >> 29;
      mult.push_back(x | 1);
    }
  }
  const uint64_t* m = mult.data();
  const int32_t* blk = block.data();
  const int32_t* succ = succ_ids ? succ_ids->data() : blk;
  auto hash = [&](size_t q) {
    uint64_t h = static_cast<uint64_t>(blk[q]) * m[0];
    const int32_t* row = &next[q * k];
    for (size_t a = 0; a < k; ++a) h += static_cast<uint64_t>(succ[row[a]]) * m[a + 1];
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    return h ^ (h >> 32);
  };
  auto same = [&](size_t p, size_t q) {
    if (blk[p] != blk[q]) return false;
    const int32_t *rp = &next[p * k], *rq = &next[q * k];
    for (size_t a = 0; a < k; ++a)
      if (succ[rp[a]] != succ[rq[a]]) return false;
    return true;
  };
  size_t cap = 16;
  while (cap < 4 * blocks) cap *= 2;
  std::vector<uint64_t>& slots = scratch.slots;
  std::vector<int32_t>& rep_id = scratch.rep_id;
  std::vector<int32_t>& refined = scratch.refined;
  slots.assign(cap, 0);
  rep_id.resize(n);
  refined.resize(n);
  auto insert = [&](uint64_t h, uint64_t entry) {
    size_t i = h & (cap - 1);
    while (slots[i] != 0) i = (i + 1) & (cap - 1);
    slots[i] = entry;
  };
  int32_t count = 0;
  for (size_t q = 0; q < n; ++q) {
    if (2 * static_cast<size_t>(count) + 2 > cap) {  // keep the load under one half
      std::vector<uint64_t> old;
      old.swap(slots);
      cap *= 4;
      slots.assign(cap, 0);
      for (uint64_t e : old)
        if (e != 0) insert(hash(static_cast<size_t>(e & 0xFFFFFFFFull) - 1), e);
    }
    uint64_t h = hash(q);
    const uint64_t tag = h & 0xFFFFFFFF00000000ull;
    for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
      if (slots[i] == 0) {
        slots[i] = tag | static_cast<uint64_t>(q + 1);
        rep_id[q] = count++;
        refined[q] = rep_id[q];
        break;
      }
      size_t p = static_cast<size_t>(slots[i] & 0xFFFFFFFFull) - 1;
      if ((slots[i] & 0xFFFFFFFF00000000ull) == tag && same(p, q)) {
        refined[q] = rep_id[p];
        break;
      }
    }
  }
  block.swap(refined);
  return static_cast<size_t>(count);
}

}  // namespace

std::vector<int32_t> coarsest_stable_partition(size_t n, size_t k, const std::vector<int32_t>& next,
                                               const std::vector<int32_t>& labels) {
  std::vector<int32_t> out(n);
  if (n == 0) return out;
  std::vector<int32_t> cur_labels(n);  // dense
  size_t num_labels = 0;
  {
    std::map<int32_t, int32_t> ids;
    for (size_t q = 0; q < n; ++q)
      cur_labels[q] = ids.try_emplace(labels[q], static_cast<int32_t>(ids.size())).first->second;
    num_labels = ids.size();
  }
  // States with equal labels and the very same successors are equivalent: merged while that
  // shrinks the automaton by a quarter or more (a remainder automaton mod 2^a 5^b M halves
  // or fifths toward M), so the Moore rounds below hash fewer states.
  MooreScratch scratch;
  std::vector<int32_t> of(n), owned, identity;  // of: [n] state of the current automaton
  for (size_t q = 0; q < n; ++q) of[q] = static_cast<int32_t>(q);
  const std::vector<int32_t>* table = &next;
  size_t cn = n;
  while (cn > 64) {
    identity.resize(cn);
    for (size_t q = 0; q < cn; ++q) identity[q] = static_cast<int32_t>(q);
    std::vector<int32_t> ids = cur_labels;
    size_t m = moore_round(cn, k, *table, cn / 4, ids, scratch, &identity);
    if (4 * m > 3 * cn) break;
    std::vector<int32_t> qnext(m * k), qlabels(m, -1);
    for (size_t q = 0; q < cn; ++q) {
      int32_t id = ids[q];
      if (qlabels[id] >= 0) continue;
      qlabels[id] = cur_labels[q];
      for (size_t a = 0; a < k; ++a) qnext[id * k + a] = ids[(*table)[q * k + a]];
    }
    for (int32_t& x : of) x = ids[x];
    owned = std::move(qnext);
    table = &owned;
    cur_labels = std::move(qlabels);
    cn = m;
  }
  // A few Moore rounds: residue automata settle in about as many rounds as their modulus has
  // digits, and a round touches each transition once where Hopcroft would revisit it up to
  // log n times.
  std::vector<int32_t> block = cur_labels;
  size_t blocks = num_labels;
  bool stable = false;
  for (int round = 0; round < kMaxMooreRounds && !stable; ++round) {
    size_t refined = moore_round(cn, k, *table, blocks, block, scratch);
    stable = refined == blocks;
    blocks = refined;
  }
  if (!stable) block = hopcroft(cn, k, *table, block);
  // Back to the original states, numbered in order of first state.
  std::vector<int32_t> id(cn, -1);
  int32_t next_id = 0;
  for (size_t q = 0; q < n; ++q) {
    int32_t b = block[of[q]];
    if (id[b] < 0) id[b] = next_id++;
    out[q] = id[b];
  }
  return out;
}

std::vector<int32_t> hopcroft(size_t n, size_t k, const std::vector<int32_t>& next,
                              const std::vector<int32_t>& labels) {
  std::vector<int32_t> block(n);
  if (n == 0) return block;
  // Inverse transitions per symbol, compressed: preds of t on a are
  // pred[start[a * (n + 1) + t] .. start[a * (n + 1) + t + 1]).
  std::vector<int32_t> start(k * (n + 1) + 1, 0), pred(n * k);
  for (size_t q = 0; q < n; ++q)
    for (size_t a = 0; a < k; ++a) ++start[a * (n + 1) + next[q * k + a] + 1];
  for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
  {
    std::vector<int32_t> fill(start.begin(), start.end() - 1);
    for (size_t q = 0; q < n; ++q)
      for (size_t a = 0; a < k; ++a)
        pred[fill[a * (n + 1) + next[q * k + a]]++] = static_cast<int32_t>(q);
  }
  // Initial blocks: one per label, states in order.
  std::map<int32_t, int32_t> label_block;
  for (size_t q = 0; q < n; ++q)
    block[q] =
        label_block.try_emplace(labels[q], static_cast<int32_t>(label_block.size())).first->second;
  const size_t nb0 = label_block.size();
  std::vector<int32_t> first(nb0 + 1, 0), end;  // [blocks] ranges of `elems`
  for (size_t q = 0; q < n; ++q) ++first[block[q] + 1];
  for (size_t b = 1; b <= nb0; ++b) first[b] += first[b - 1];
  end.assign(first.begin() + 1, first.end());
  first.pop_back();
  std::vector<int32_t> elems(n), pos(n);
  {
    std::vector<int32_t> fill = first;
    for (size_t q = 0; q < n; ++q) {
      pos[q] = fill[block[q]]++;
      elems[pos[q]] = static_cast<int32_t>(q);
    }
  }
  std::vector<int32_t> marked(nb0, 0), touched, work, splitter;
  // Every initial block but a largest one splits (Hopcroft: the last is implied by the rest).
  std::vector<uint8_t> in_work(nb0, 1);
  size_t largest = 0;
  for (size_t b = 1; b < nb0; ++b)
    if (end[b] - first[b] > end[largest] - first[largest]) largest = b;
  in_work[largest] = 0;
  for (size_t b = 0; b < nb0; ++b)
    if (b != largest) work.push_back(static_cast<int32_t>(b));
  while (!work.empty()) {
    int32_t s = work.back();
    work.pop_back();
    in_work[s] = 0;
    splitter.assign(elems.begin() + first[s], elems.begin() + end[s]);
    for (size_t a = 0; a < k; ++a) {
      for (int32_t t : splitter)
        for (int32_t i = start[a * (n + 1) + t]; i < start[a * (n + 1) + t + 1]; ++i) {
          int32_t p = pred[i], b = block[p];
          int32_t at = first[b] + marked[b];
          if (pos[p] < at) continue;  // already marked
          if (marked[b] == 0) touched.push_back(b);
          // Swap p into the marked prefix of its block.
          int32_t other = elems[at];
          std::swap(elems[at], elems[pos[p]]);
          pos[other] = pos[p];
          pos[p] = at;
          ++marked[b];
        }
      for (int32_t b : touched) {
        int32_t m = marked[b];
        marked[b] = 0;
        if (m == end[b] - first[b]) continue;
        // The marked prefix becomes a new block c.
        int32_t c = static_cast<int32_t>(first.size());
        first.push_back(first[b]);
        end.push_back(first[b] + m);
        first[b] += m;
        marked.push_back(0);
        for (int32_t i = first[c]; i < end[c]; ++i) block[elems[i]] = c;
        if (in_work[b]) {
          in_work.push_back(1);
          work.push_back(c);
        } else if (m <= end[b] - first[b]) {
          in_work.push_back(1);
          work.push_back(c);
        } else {
          in_work.push_back(0);
          in_work[b] = 1;
          work.push_back(b);
        }
      }
      touched.clear();
    }
  }
  // Dense ids in order of first state.
  std::vector<int32_t> id(first.size(), -1), out(n);
  int32_t next_id = 0;
  for (size_t q = 0; q < n; ++q) {
    if (id[block[q]] < 0) id[block[q]] = next_id++;
    out[q] = id[block[q]];
  }
  return out;
}

}  // namespace deepinfer::structured
