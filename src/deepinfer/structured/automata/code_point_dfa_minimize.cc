// Minimization (Hopcroft's partition refinement, dfa_partition.h) and the questions asked of
// a minimized code-point automaton: emptiness, universality, length range.
#include <algorithm>
#include <functional>

#include "deepinfer/structured/automata/code_point_dfa.h"
#include "deepinfer/structured/automata/dfa_partition.h"

namespace deepinfer::structured {

CodePointDfa dfa_minimize(const CodePointDfa& d) { return dfa_reduce(d, true); }

CodePointDfa dfa_reduce(const CodePointDfa& d, bool merge) {
  const size_t n = d.num_states(), na = d.atoms.size();
  // Live = reachable from the start and able to reach acceptance.
  std::vector<uint8_t> reach(n, 0), coreach(n, 0);
  std::vector<int32_t> work = {0};
  if (n) reach[0] = 1;
  while (!work.empty()) {
    int32_t q = work.back();
    work.pop_back();
    for (int32_t t : d.next[q])
      if (t >= 0 && !reach[t]) {
        reach[t] = 1;
        work.push_back(t);
      }
  }
  // Predecessors, compressed: those of t are preds[pstart[t] .. pstart[t + 1]).
  std::vector<int32_t> pstart(n + 1, 0), preds;
  for (size_t q = 0; q < n; ++q)
    for (int32_t t : d.next[q])
      if (t >= 0) ++pstart[t + 1];
  for (size_t q = 0; q < n; ++q) pstart[q + 1] += pstart[q];
  preds.resize(pstart[n]);
  {
    std::vector<int32_t> fill(pstart.begin(), pstart.end() - 1);
    for (size_t q = 0; q < n; ++q)
      for (int32_t t : d.next[q])
        if (t >= 0) preds[fill[t]++] = static_cast<int32_t>(q);
  }
  for (size_t q = 0; q < n; ++q)
    if (d.accept[q]) {
      coreach[q] = 1;
      work.push_back(static_cast<int32_t>(q));
    }
  while (!work.empty()) {
    int32_t q = work.back();
    work.pop_back();
    for (int32_t i = pstart[q]; i < pstart[q + 1]; ++i)
      if (int32_t p = preds[i]; !coreach[p]) {
        coreach[p] = 1;
        work.push_back(p);
      }
  }
  CodePointDfa out;
  out.atoms = d.atoms;
  if (n == 0 || !reach[0] || !coreach[0]) {  // empty language: one dead start state
    out.next.assign(1, std::vector<int32_t>(na, -1));
    out.accept.assign(1, 0);
    return out;
  }
  auto live = [&](int32_t q) { return q >= 0 && reach[q] && coreach[q]; };
  std::vector<int32_t> block(n, -1);
  size_t num_blocks = n;
  if (!merge) {
    for (size_t q = 0; q < n; ++q)
      if (live(static_cast<int32_t>(q))) block[q] = static_cast<int32_t>(q);
  } else {
    // The live states plus one sink for every dead or missing transition (its own label:
    // it cannot reach acceptance, which every live state can), made complete for Hopcroft.
    std::vector<int32_t> dense(n, -1), states;
    for (size_t q = 0; q < n; ++q)
      if (live(static_cast<int32_t>(q))) {
        dense[q] = static_cast<int32_t>(states.size());
        states.push_back(static_cast<int32_t>(q));
      }
    const size_t m = states.size() + 1;
    const int32_t sink = static_cast<int32_t>(states.size());
    std::vector<int32_t> next(m * na, sink), labels(m, 2);
    for (size_t i = 0; i < states.size(); ++i) {
      labels[i] = d.accept[states[i]];
      for (size_t a = 0; a < na; ++a) {
        int32_t t = d.next[states[i]][a];
        if (live(t)) next[i * na + a] = dense[t];
      }
    }
    std::vector<int32_t> part = coarsest_stable_partition(m, na, next, labels);
    for (size_t i = 0; i < states.size(); ++i) block[states[i]] = part[i];
    num_blocks = static_cast<size_t>(*std::max_element(part.begin(), part.end())) + 1;
  }
  // Renumber blocks in BFS order from the start so the start is state 0.
  std::vector<int32_t> id(num_blocks, -1), rep;
  id[block[0]] = 0;
  rep.push_back(0);
  for (size_t i = 0; i < rep.size(); ++i) {
    int32_t q = rep[i];
    std::vector<int32_t> row(na, -1);
    for (size_t a = 0; a < na; ++a) {
      int32_t t = d.next[q][a];
      if (!live(t)) continue;
      if (id[block[t]] < 0) {
        id[block[t]] = static_cast<int32_t>(rep.size());
        rep.push_back(t);
      }
      row[a] = id[block[t]];
    }
    out.next.push_back(std::move(row));
    out.accept.push_back(d.accept[q]);
  }
  return out;
}

bool dfa_is_empty(const CodePointDfa& d) {
  CodePointDfa m = dfa_minimize(d);
  return !m.accept[0] &&
         std::all_of(m.next[0].begin(), m.next[0].end(), [](int32_t t) { return t < 0; });
}

std::pair<int64_t, int64_t> dfa_length_range(const CodePointDfa& d) {
  const size_t n = d.num_states();
  // Shortest: BFS. Longest: DFS over live states; a cycle among them means unbounded.
  std::vector<int64_t> dist(n, -1);
  std::vector<int32_t> queue = {0};
  dist[0] = 0;
  int64_t shortest = -1;
  for (size_t i = 0; i < queue.size(); ++i) {
    int32_t q = queue[i];
    if (d.accept[q] && shortest < 0) shortest = dist[q];
    for (int32_t t : d.next[q])
      if (t >= 0 && dist[t] < 0) {
        dist[t] = dist[q] + 1;
        queue.push_back(t);
      }
  }
  if (shortest < 0) return {-1, -1};
  std::vector<int64_t> longest(n, -2);  // -2 unvisited, -3 on the DFS path
  std::function<int64_t(int32_t)> walk = [&](int32_t q) -> int64_t {
    if (longest[q] == -3) return -1;  // cycle (minimized: every state is live)
    if (longest[q] != -2) return longest[q];
    longest[q] = -3;
    int64_t best = d.accept[q] ? 0 : -2;
    for (int32_t t : d.next[q]) {
      if (t < 0) continue;
      int64_t l = walk(t);
      if (l == -1) {
        longest[q] = -1;
        return -1;
      }
      if (l >= 0) best = std::max(best, l + 1);
    }
    longest[q] = best;
    return best;
  };
  return {shortest, walk(0)};
}

bool dfa_is_universal(const CodePointDfa& d) {
  CodePointDfa m = dfa_minimize(d);
  if (m.num_states() != 1 || !m.accept[0]) return false;
  return std::all_of(m.next[0].begin(), m.next[0].end(), [](int32_t t) { return t == 0; });
}

}  // namespace deepinfer::structured
