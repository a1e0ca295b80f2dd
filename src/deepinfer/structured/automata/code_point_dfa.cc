// Thompson NFA -> subset construction over code-point atoms, products, length counters and
// lowering to grammar rules (see code_point_dfa.h; minimization is code_point_dfa_minimize.cc).
#include "deepinfer/structured/automata/code_point_dfa.h"

#include <algorithm>
#include <functional>
#include <map>

#include "deepinfer/structured/automata/char_class.h"

namespace deepinfer::structured {
namespace {

constexpr uint32_t kMaxCp = 0x10FFFF;
constexpr size_t kMaxNfaStates = 200'000;
using Kind = RegexNode::Kind;
using Atoms = std::vector<std::pair<uint32_t, uint32_t>>;

Status too_many_states(size_t cap) {
  return unsupported("string automaton: more than {} states (the cap on one string language)", cap);
}

// Atoms from interval starts: every boundary begins a new atom; surrogates are left out.
Atoms atoms_from_boundaries(std::vector<uint32_t> starts) {
  starts.push_back(0);
  starts.push_back(0xD800);
  starts.push_back(0xE000);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  Atoms atoms;
  for (size_t i = 0; i < starts.size(); ++i) {
    if (starts[i] > kMaxCp) break;
    uint32_t end =
        i + 1 < starts.size() && starts[i + 1] <= kMaxCp + 1 ? starts[i + 1] - 1 : kMaxCp;
    if (starts[i] >= 0xD800 && starts[i] <= 0xDFFF) continue;
    atoms.emplace_back(starts[i], end);
  }
  return atoms;
}

// Index of the atom of `atoms` that contains code point cp, or -1.
int atom_of(const Atoms& atoms, uint32_t cp) {
  auto it = std::upper_bound(atoms.begin(), atoms.end(), std::make_pair(cp, kMaxCp + 1));
  if (it == atoms.begin()) return -1;
  --it;
  return cp <= it->second ? static_cast<int>(it - atoms.begin()) : -1;
}

// Re-expresses `d` over a finer atom partition.
CodePointDfa refine(const CodePointDfa& d, const Atoms& atoms) {
  std::vector<int> old(atoms.size());
  for (size_t a = 0; a < atoms.size(); ++a) old[a] = atom_of(d.atoms, atoms[a].first);
  CodePointDfa out;
  out.atoms = atoms;
  out.accept = d.accept;
  out.next.resize(d.num_states());
  for (size_t s = 0; s < d.num_states(); ++s) {
    out.next[s].resize(atoms.size());
    for (size_t a = 0; a < atoms.size(); ++a) out.next[s][a] = old[a] < 0 ? -1 : d.next[s][old[a]];
  }
  return out;
}

struct Nfa {
  std::vector<std::vector<int>> eps;                    // [states]
  std::vector<std::vector<std::pair<int, int>>> edges;  // [states] (class node, target)
  // Empty moves allowed only before the first character (`^`) / after the last one (`$`).
  std::vector<std::vector<int>> start_eps, end_eps;  // [states]
  int add() {
    eps.emplace_back();
    edges.emplace_back();
    start_eps.emplace_back();
    end_eps.emplace_back();
    return static_cast<int>(eps.size()) - 1;
  }
};

class NfaBuilder {
 public:
  NfaBuilder(const RegexAst& ast, Nfa& nfa) : ast_(ast), nfa_(nfa) {}

  // Adds node `id` from state `from`; returns the end state.
  Result<int> build(int id, int from) {
    if (nfa_.eps.size() > kMaxNfaStates) return too_many_states(kMaxNfaStates);
    const RegexNode& n = ast_.nodes[id];
    switch (n.kind) {
      case Kind::kClass: {
        int to = nfa_.add();
        nfa_.edges[from].emplace_back(id, to);
        return to;
      }
      case Kind::kConcat: {
        int cur = from;
        for (int k : n.kids) {
          DI_ASSIGN_OR_RETURN(cur, build(k, cur));
        }
        return cur;
      }
      case Kind::kAlt: {
        int end = nfa_.add();
        for (int k : n.kids) {
          int start = nfa_.add();
          nfa_.eps[from].push_back(start);
          DI_ASSIGN_OR_RETURN(int e, build(k, start));
          nfa_.eps[e].push_back(end);
        }
        return end;
      }
      case Kind::kStart:
      case Kind::kEnd: {
        int to = nfa_.add();
        (n.kind == Kind::kStart ? nfa_.start_eps : nfa_.end_eps)[from].push_back(to);
        return to;
      }
      case Kind::kRepeat: {
        int cur = from;
        for (int64_t i = 0; i < n.lo; ++i) {
          DI_ASSIGN_OR_RETURN(cur, build(n.kids[0], cur));
        }
        if (n.hi < 0) {
          int loop = nfa_.add();
          nfa_.eps[cur].push_back(loop);
          int start = nfa_.add();
          nfa_.eps[loop].push_back(start);
          DI_ASSIGN_OR_RETURN(int e, build(n.kids[0], start));
          nfa_.eps[e].push_back(loop);
          return loop;
        }
        int end = nfa_.add();
        for (int64_t i = n.lo; i < n.hi; ++i) {
          nfa_.eps[cur].push_back(end);
          DI_ASSIGN_OR_RETURN(cur, build(n.kids[0], cur));
        }
        nfa_.eps[cur].push_back(end);
        return end;
      }
    }
    return from;
  }

 private:
  const RegexAst& ast_;
  Nfa& nfa_;
};

// Closes `set` under empty moves, and also under `^` moves when at_start and `$` moves
// when at_end (a state reached through `$` can only accept, so the subset construction
// closes with at_end only to decide acceptance).
void eps_closure(const Nfa& nfa, std::vector<int>& set, std::vector<uint8_t>& seen,
                 bool at_start = false, bool at_end = false) {
  for (int s : set) seen[s] = 1;
  auto visit = [&](const std::vector<int>& targets) {
    for (int t : targets)
      if (!seen[t]) {
        seen[t] = 1;
        set.push_back(t);
      }
  };
  for (size_t i = 0; i < set.size(); ++i) {
    int q = set[i];
    visit(nfa.eps[q]);
    if (at_start) visit(nfa.start_eps[q]);
    if (at_end) visit(nfa.end_eps[q]);
  }
  for (int s : set) seen[s] = 0;
  std::sort(set.begin(), set.end());
}

}  // namespace

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n && i + k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

namespace {

// The union of the languages of `roots` (nodes of `ast`), by subset construction. Positions
// matter only at the ends: the start state (at_start) also follows `^` moves, and a state
// accepts when acceptance is reachable with `$` moves allowed.
Result<CodePointDfa> dfa_from_roots(const RegexAst& ast, const std::vector<int>& roots,
                                    size_t max_states) {
  std::vector<uint32_t> starts;
  for (const auto& n : ast.nodes)
    if (n.kind == Kind::kClass)
      for (auto [lo, hi] : n.set.ranges()) {
        starts.push_back(lo);
        starts.push_back(hi + 1);
      }
  CodePointDfa d;
  d.atoms = atoms_from_boundaries(std::move(starts));
  const size_t na = d.atoms.size();

  Nfa nfa;
  int start = nfa.add();
  int accept = nfa.add();
  NfaBuilder nb(ast, nfa);
  for (int br : roots) {
    int s = nfa.add();
    nfa.eps[start].push_back(s);
    DI_ASSIGN_OR_RETURN(int e, nb.build(br, s));
    nfa.eps[e].push_back(accept);
  }
  // Which atoms each class node admits (atoms refine every class, so one point decides).
  std::vector<std::vector<uint8_t>> admits(ast.nodes.size());  // [nodes][atoms]
  for (size_t i = 0; i < ast.nodes.size(); ++i)
    if (ast.nodes[i].kind == Kind::kClass) {
      admits[i].resize(na);
      for (size_t a = 0; a < na; ++a) admits[i][a] = ast.nodes[i].set.contains(d.atoms[a].first);
    }

  std::vector<uint8_t> seen(nfa.eps.size(), 0);
  // Key: (is the start state, closed set); the start state follows `^` moves, others never.
  std::map<std::pair<bool, std::vector<int>>, int32_t> index;
  std::vector<std::vector<int>> sets;
  std::vector<uint8_t> initial;
  auto intern = [&](std::vector<int> set, bool at_start) -> int32_t {
    if (set.empty()) return -1;
    eps_closure(nfa, set, seen, at_start);
    auto [it, inserted] = index.try_emplace({at_start, set}, static_cast<int32_t>(sets.size()));
    if (inserted) {
      sets.push_back(std::move(set));
      initial.push_back(at_start);
    }
    return it->second;
  };
  intern({start}, true);
  for (size_t q = 0; q < sets.size(); ++q) {
    if (sets.size() > max_states) return too_many_states(max_states);
    std::vector<int32_t> row(na, -1);
    for (size_t a = 0; a < na; ++a) {
      std::vector<int> to;
      for (int s : sets[q])
        for (auto [cls, t] : nfa.edges[s])
          if (admits[cls][a] && !seen[t]) {
            seen[t] = 1;
            to.push_back(t);
          }
      for (int t : to) seen[t] = 0;
      row[a] = intern(std::move(to), false);
    }
    d.next.push_back(std::move(row));
    std::vector<int> final_set = sets[q];
    if (ast.has_assertions) eps_closure(nfa, final_set, seen, initial[q], true);
    d.accept.push_back(std::binary_search(final_set.begin(), final_set.end(), accept));
  }
  return d;
}

}  // namespace

Result<CodePointDfa> dfa_from_regex(const RegexAst& ast, size_t max_states) {
  bool looks = false;
  for (const auto& l : ast.lookaheads) looks = looks || !l.empty();
  if (!looks) return dfa_from_roots(ast, ast.branches, max_states);
  // A branch with leading lookaheads is its body intersected with (or minus) each lookahead's
  // whole-string language; branches are then united.
  std::vector<CodePointDfa> branches;
  for (size_t b = 0; b < ast.branches.size(); ++b) {
    std::vector<CodePointDfa> parts;
    DI_ASSIGN_OR_RETURN(CodePointDfa body, dfa_from_roots(ast, {ast.branches[b]}, max_states));
    parts.push_back(dfa_minimize(body));
    std::vector<bool> negative = {false};
    for (const auto& l :
         b < ast.lookaheads.size() ? ast.lookaheads[b] : std::vector<RegexAst::Lookahead>{}) {
      DI_ASSIGN_OR_RETURN(CodePointDfa x, dfa_from_roots(ast, {l.node}, max_states));
      parts.push_back(dfa_minimize(x));
      negative.push_back(l.negative);
    }
    std::vector<const CodePointDfa*> ptrs;
    for (const auto& p : parts) ptrs.push_back(&p);
    DI_ASSIGN_OR_RETURN(CodePointDfa both, dfa_product(
                                               ptrs,
                                               [&](const std::vector<bool>& m) {
                                                 for (size_t i = 0; i < m.size(); ++i)
                                                   if (m[i] == negative[i]) return false;
                                                 return true;
                                               },
                                               max_states));
    branches.push_back(std::move(both));
  }
  std::vector<const CodePointDfa*> ptrs;
  for (const auto& p : branches) ptrs.push_back(&p);
  return dfa_product(
      ptrs,
      [](const std::vector<bool>& m) { return std::find(m.begin(), m.end(), true) != m.end(); },
      max_states);
}

Result<CodePointDfa> dfa_from_pattern(std::string_view pattern, bool search, size_t max_states) {
  return dfa_from_pattern(pattern, search, nullptr, max_states);
}

Result<CodePointDfa> dfa_from_pattern(std::string_view pattern, bool search, PatternDfaMemo* memo,
                                      size_t max_states) {
  auto key = std::make_tuple(std::string(pattern), search, max_states);
  if (memo) {
    auto it = memo->built_.find(key);
    if (it != memo->built_.end()) return it->second;
  }
  DI_ASSIGN_OR_RETURN(RegexAst ast, parse_regex(pattern, search));
  DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_regex(ast, max_states));
  CodePointDfa min = dfa_minimize(d);
  if (memo) memo->built_.emplace(std::move(key), min);
  return min;
}

Result<CodePointDfa> dfa_of_strings(const std::vector<std::string>& strings) {
  RegexAst ast;
  for (const auto& s : strings) {
    RegexNode cat = RegexNode::of(Kind::kConcat);
    for (uint32_t cp : decode_utf8(s)) {
      CodePointSet one;
      one.add(cp);
      ast.nodes.push_back(RegexNode::of_class(one));
      cat.kids.push_back(static_cast<int>(ast.nodes.size()) - 1);
    }
    ast.nodes.push_back(std::move(cat));
    ast.branches.push_back(static_cast<int>(ast.nodes.size()) - 1);
  }
  DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_regex(ast, kMaxNfaStates));
  return dfa_minimize(d);
}

Result<CodePointDfa> dfa_product(const std::vector<const CodePointDfa*>& parts,
                                 const std::function<bool(const std::vector<bool>&)>& accept,
                                 size_t max_states) {
  std::vector<uint32_t> starts;
  for (const auto* p : parts)
    for (auto [lo, hi] : p->atoms) starts.push_back(lo);
  Atoms atoms = atoms_from_boundaries(std::move(starts));
  std::vector<CodePointDfa> fine;
  for (const auto* p : parts) fine.push_back(refine(*p, atoms));
  CodePointDfa d;
  d.atoms = atoms;
  std::map<std::vector<int32_t>, int32_t> index;
  std::vector<std::vector<int32_t>> tuples;
  auto intern = [&](std::vector<int32_t> t) -> int32_t {
    auto [it, inserted] = index.try_emplace(t, static_cast<int32_t>(tuples.size()));
    if (inserted) tuples.push_back(std::move(t));
    return it->second;
  };
  std::vector<int32_t> first(parts.size(), 0);
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i]->num_states() == 0) first[i] = -1;  // the empty language has no states
  intern(std::move(first));
  std::vector<bool> acc(parts.size());
  for (size_t q = 0; q < tuples.size(); ++q) {
    if (tuples.size() > max_states) return too_many_states(max_states);
    std::vector<int32_t> row(atoms.size());
    for (size_t a = 0; a < atoms.size(); ++a) {
      std::vector<int32_t> t(parts.size());
      for (size_t i = 0; i < parts.size(); ++i)
        t[i] = tuples[q][i] < 0 ? -1 : fine[i].next[tuples[q][i]][a];
      row[a] = intern(std::move(t));  // dead parts stay as -1: the tuple may still accept
    }
    for (size_t i = 0; i < parts.size(); ++i)
      acc[i] = tuples[q][i] >= 0 && fine[i].accept[tuples[q][i]];
    d.next.push_back(std::move(row));
    d.accept.push_back(accept(acc));
  }
  return dfa_minimize(d);
}

Result<CodePointDfa> dfa_with_length(const CodePointDfa& d, int64_t lo, int64_t hi,
                                     size_t max_states) {
  const int64_t cap = hi >= 0 ? hi : lo;  // unbounded: counts saturate at lo
  CodePointDfa out;
  out.atoms = d.atoms;
  std::map<std::pair<int32_t, int64_t>, int32_t> index;
  std::vector<std::pair<int32_t, int64_t>> states;
  auto intern = [&](int32_t q, int64_t n) -> int32_t {
    if (q < 0) return -1;
    auto [it, inserted] = index.try_emplace({q, n}, static_cast<int32_t>(states.size()));
    if (inserted) states.emplace_back(q, n);
    return it->second;
  };
  intern(0, 0);
  for (size_t i = 0; i < states.size(); ++i) {
    if (states.size() > max_states) return too_many_states(max_states);
    auto [q, n] = states[i];
    std::vector<int32_t> row(d.atoms.size(), -1);
    if (hi < 0 || n < hi)
      for (size_t a = 0; a < d.atoms.size(); ++a)
        row[a] = intern(d.next[q][a], std::min(n + 1, cap));
    out.next.push_back(std::move(row));
    out.accept.push_back(d.accept[q] && n >= lo);
  }
  if (hi < 0) return dfa_minimize(out);
  // Bounded: every transition raises the count, so the automaton is acyclic and states are
  // in BFS (count) order. One pass from the deepest level merges equivalent states (Revuz),
  // where Moore refinement would need one round per level.
  const size_t n = out.num_states(), na = out.atoms.size();
  std::vector<int32_t> cls(n, -1);
  std::map<std::vector<int32_t>, int32_t> sig;
  std::vector<size_t> rep;
  for (size_t i = n; i-- > 0;) {
    std::vector<int32_t> key(na + 1);
    key[0] = out.accept[i];
    bool live = out.accept[i];
    for (size_t a = 0; a < na; ++a) {
      int32_t t = out.next[i][a];
      key[a + 1] = t < 0 ? -1 : cls[t];
      live = live || key[a + 1] >= 0;
    }
    if (!live) continue;
    auto [it, fresh] = sig.try_emplace(std::move(key), static_cast<int32_t>(rep.size()));
    if (fresh) rep.push_back(i);
    cls[i] = it->second;
  }
  CodePointDfa m;
  m.atoms = out.atoms;
  if (cls[0] < 0) {
    m.next.assign(1, std::vector<int32_t>(na, -1));
    m.accept.assign(1, 0);
    return m;
  }
  std::vector<int32_t> id(rep.size(), -1);
  std::vector<int32_t> order = {cls[0]};
  id[cls[0]] = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    size_t i = rep[order[k]];
    std::vector<int32_t> row(na, -1);
    for (size_t a = 0; a < na; ++a) {
      int32_t t = out.next[i][a];
      if (t < 0 || cls[t] < 0) continue;
      if (id[cls[t]] < 0) {
        id[cls[t]] = static_cast<int32_t>(order.size());
        order.push_back(cls[t]);
      }
      row[a] = id[cls[t]];
    }
    m.next.push_back(std::move(row));
    m.accept.push_back(out.accept[i]);
  }
  return m;
}

int64_t dfa_length_fit(const CodePointDfa& d, int64_t hi, size_t max_states) {
  // States of the length product at count n are (q, n) for q reachable in exactly n steps.
  std::vector<uint8_t> level(d.num_states(), 0), next_level(d.num_states(), 0);
  level[0] = 1;
  size_t total = 0;
  for (int64_t n = 0; n <= hi; ++n) {
    size_t here = 0;
    for (uint8_t x : level) here += x;
    if (here == 0) return hi;  // no longer strings: every bound fits
    total += here;
    if (total + 1 > max_states) return n - 1;
    std::fill(next_level.begin(), next_level.end(), 0);
    for (size_t q = 0; q < level.size(); ++q)
      if (level[q])
        for (int32_t t : d.next[q])
          if (t >= 0) next_level[t] = 1;
    level.swap(next_level);
  }
  return hi;
}

bool dfa_matches(const CodePointDfa& d, std::string_view s) {
  int32_t q = 0;
  for (uint32_t cp : decode_utf8(s)) {
    int a = atom_of(d.atoms, cp);
    if (a < 0 || q < 0) return false;
    q = d.next[q][a];
    if (q < 0) return false;
  }
  return d.accept[q];
}

Element dfa_to_rule(GrammarBuilder& b, const CodePointDfa& in, bool json_string,
                    const std::string& name) {
  CodePointDfa d = dfa_reduce(in, /*merge=*/false);  // inputs come minimized; trim only
  std::vector<uint32_t> rules(d.num_states());
  for (size_t q = 0; q < d.num_states(); ++q) rules[q] = b.new_rule(name);
  for (size_t q = 0; q < d.num_states(); ++q) {
    std::map<int32_t, CodePointSet> by_target;
    for (size_t a = 0; a < d.atoms.size(); ++a)
      if (d.next[q][a] >= 0) by_target[d.next[q][a]].add(d.atoms[a].first, d.atoms[a].second);
    for (const auto& [t, set] : by_target)
      b.add_alt(rules[q], {char_class(b, set, json_string), GrammarBuilder::call(rules[t])});
    if (d.accept[q]) b.add_alt(rules[q], {});
  }
  return GrammarBuilder::call(rules[0]);
}

}  // namespace deepinfer::structured
