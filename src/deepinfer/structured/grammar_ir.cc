// GrammarBuilder lowering and freezing, plus the left-recursion check the matcher relies on.
#include "deepinfer/structured/grammar_ir.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>

namespace deepinfer::structured {
namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

int ByteSet::count() const {
  int n = 0;
  for (uint64_t w : bits) n += __builtin_popcountll(w);
  return n;
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

GrammarBuilder::GrammarBuilder(GrammarLimits limits) : limits_(limits), start_seconds_(now_seconds()) {}

uint32_t GrammarBuilder::new_rule(std::string name) {
  rules_.emplace_back();
  names_.push_back(std::move(name));
  return static_cast<uint32_t>(rules_.size() - 1);
}

void GrammarBuilder::add_alt(uint32_t rule, Sequence seq) {
  num_elements_ += seq.size() + 1;
  rules_[rule].push_back(std::move(seq));
}

uint32_t GrammarBuilder::rule_with_alts(std::string name, std::vector<Sequence> alts) {
  uint32_t r = new_rule(std::move(name));
  for (auto& a : alts) add_alt(r, std::move(a));
  return r;
}

Element GrammarBuilder::bytes(const ByteSet& set) {
  // Identical classes share one entry (a literal's bytes are looked up one by one).
  auto [it, inserted] = byte_set_ids_.try_emplace(set, static_cast<uint32_t>(byte_sets_.size()));
  if (inserted) byte_sets_.push_back(set);
  return {ElemKind::kBytes, it->second};
}

Element GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

Sequence GrammarBuilder::literal(std::string_view text) {
  Sequence seq;
  for (char c : text) seq.push_back(byte(static_cast<uint8_t>(c)));
  return seq;
}

Element GrammarBuilder::star(const Sequence& seq, const std::string& hint) {
  uint32_t r = new_rule(hint);
  Sequence body = seq;
  body.push_back(call(r));
  add_alt(r, std::move(body));
  add_alt(r, {});
  return call(r);
}

Element GrammarBuilder::plus(const Sequence& seq, const std::string& hint) {
  Element tail = star(seq, hint + "_tail");
  Sequence body = seq;
  body.push_back(tail);
  return call(rule_with_alts(hint, {std::move(body)}));
}

Element GrammarBuilder::optional(const Sequence& seq, const std::string& hint) {
  return call(rule_with_alts(hint, {seq, {}}));
}

Element GrammarBuilder::repeat(const Sequence& seq, int64_t min, int64_t max,
                               const std::string& hint) {
  // Built back to front: the optional copies as a chain opt_i ::= seq opt_{i-1} | () (or seq*
  // when unbounded), then the required ones as req_i ::= seq req_{i-1}.
  uint32_t next;
  if (max < 0) {
    next = star(seq, hint + "_star").arg;
  } else {
    next = rule_with_alts(hint + "_end", {{}});
    std::vector<uint32_t> chain = {next};
    for (int64_t i = 0; i < max - min; ++i) {
      Sequence body = seq;
      body.push_back(call(next));
      next = rule_with_alts(hint + "_opt", {std::move(body), {}});
      chain.push_back(next);
    }
    if (chain.size() > 2) chains_.push_back(std::move(chain));
  }
  std::vector<uint32_t> chain = {next};
  for (int64_t i = 0; i < min; ++i) {
    Sequence body = seq;
    body.push_back(call(next));
    next = rule_with_alts(hint + "_req", {std::move(body)});
    chain.push_back(next);
  }
  if (chain.size() > 2) chains_.push_back(std::move(chain));
  return call(next);
}

Status GrammarBuilder::check_budget() const {
  if (num_elements_ > limits_.max_elements)
    return resource_exhausted("grammar: compiled grammar exceeds the size cap ({} elements)",
                              limits_.max_elements);
  if (now_seconds() - start_seconds_ > limits_.max_compile_seconds)
    return resource_exhausted("grammar: compilation exceeded the time cap ({} s)",
                              limits_.max_compile_seconds);
  return Status::ok();
}

namespace {

// Which rules derive a string whose bytes all pass `byte_ok` (a worklist over alternatives,
// linear in the grammar: a chain written top-down settles as fast as one written bottom-up).
// With byte_ok = "never": nullable rules; with "the class is not empty": productive ones.
std::vector<bool> rules_deriving(const std::vector<std::vector<Sequence>>& rules,
                                 const std::function<bool(const Element&)>& byte_ok) {
  const size_t n = rules.size();
  std::vector<bool> yes(n, false);
  std::vector<uint32_t> alt_rule, pending;           // [alts]
  std::vector<std::vector<uint32_t>> uses(n);        // [rules] alternatives calling it
  std::vector<uint32_t> work;
  for (uint32_t r = 0; r < n; ++r)
    for (const auto& alt : rules[r]) {
      const auto a = static_cast<uint32_t>(alt_rule.size());
      alt_rule.push_back(r);
      uint32_t calls = 0;
      bool dead = false;
      for (const auto& e : alt) {
        if (e.kind != ElemKind::kRule) {
          dead = dead || !byte_ok(e);
        } else if (e.arg < n) {
          uses[e.arg].push_back(a);
          ++calls;
        } else {
          dead = true;
        }
      }
      pending.push_back(dead ? UINT32_MAX : calls);
      if (calls == 0 && !dead && !yes[r]) {
        yes[r] = true;
        work.push_back(r);
      }
    }
  while (!work.empty()) {
    const uint32_t r = work.back();
    work.pop_back();
    for (uint32_t a : uses[r]) {
      if (pending[a] == UINT32_MAX || --pending[a] != 0 || yes[alt_rule[a]]) continue;
      yes[alt_rule[a]] = true;
      work.push_back(alt_rule[a]);
    }
  }
  return yes;
}

// The first rule found on a cycle of non-tail calls reachable before any byte (an explicit
// stack: a grammar of 100,000 nested rules must not overflow the thread's stack).
std::optional<uint32_t> left_recursive_rule(const std::vector<std::vector<uint32_t>>& edges) {
  const size_t n = edges.size();
  std::vector<uint8_t> color(n, 0);
  std::vector<std::pair<uint32_t, size_t>> stack;  // (rule, next edge)
  for (uint32_t s = 0; s < n; ++s) {
    if (color[s]) continue;
    color[s] = 1;
    stack.push_back({s, 0});
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == edges[r].size()) {
        color[r] = 2;
        stack.pop_back();
        continue;
      }
      const uint32_t t = edges[r][i++];
      if (color[t] == 1) return t;
      if (color[t] == 0) {
        color[t] = 1;
        stack.push_back({t, 0});
      }
    }
  }
  return std::nullopt;
}

}  // namespace

Result<Grammar> GrammarBuilder::build(uint32_t root, std::string_view no_string) const {
  DI_RETURN_IF_ERROR(check_budget());
  size_t n = rules_.size();
  if (root >= n) return invalid_argument("grammar: root rule {} does not exist", root);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r])
      for (const auto& e : alt)
        if (e.kind == ElemKind::kRule && e.arg >= n)
          return invalid_argument("grammar: rule {} calls unknown rule {}", r, e.arg);
  // Nullable rules, then the graph of non-tail calls reachable before any byte.
  const std::vector<bool> nullable = rules_deriving(rules_, [](const Element&) { return false; });
  std::vector<std::vector<uint32_t>> edges(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r])
      for (size_t i = 0; i < alt.size(); ++i) {
        const auto& e = alt[i];
        if (e.kind != ElemKind::kRule) break;
        if (i + 1 < alt.size()) edges[r].push_back(e.arg);  // tail calls cannot grow the stack
        if (!nullable[e.arg]) break;
      }
  if (auto cycle = left_recursive_rule(edges))
    return unsupported("grammar: rule '{}' is left-recursive; rewrite it with repetition",
                       names_[*cycle]);
  // Productive rules: those that match some string. An alternative that needs one that does
  // not (a $ref cycle, an unsatisfiable property, an empty character class) is dropped, so
  // the matcher never offers a prefix that cannot be completed; a root that matches nothing
  // is an error instead of a grammar that only allows EOS.
  const std::vector<bool> productive =
      rules_deriving(rules_, [this](const Element& e) { return !byte_sets_[e.arg].empty(); });
  if (!productive[root]) {
    if (!no_string.empty()) return invalid_argument("{}", no_string);
    return invalid_argument(
        "grammar: the start rule '{}' matches no string (every way through it needs a rule that "
        "never ends, such as one that only calls itself, or an empty character class)",
        names_[root]);
  }
  auto alt_productive = [&](const Sequence& alt) {
    for (const auto& e : alt)
      if (e.kind == ElemKind::kRule ? !productive[e.arg] : byte_sets_[e.arg].empty()) return false;
    return true;
  };

  Grammar g;
  g.byte_sets = byte_sets_;
  g.rule_names = names_;
  g.root = root;
  g.nullable.assign(nullable.begin(), nullable.end());
  g.rule_alts.resize(n);
  g.elements.reserve(num_elements_);
  std::vector<bool> pruned(n, false);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r]) {
      if (!alt_productive(alt)) {
        pruned[r] = true;
        continue;
      }
      g.rule_alts[r].push_back(static_cast<uint32_t>(g.elements.size()));
      g.elements.insert(g.elements.end(), alt.begin(), alt.end());
      g.elements.push_back({ElemKind::kEndAlt, 0});
    }
  // A counted chain is keyed as links laid out alike: one that lost alternatives is not.
  for (const auto& chain : chains_)
    if (std::none_of(chain.begin(), chain.end(), [&](uint32_t r) { return pruned[r]; }))
      g.counted_chains.push_back(chain);
  return g;
}

std::string Grammar::to_string() const {
  std::string out;
  for (size_t r = 0; r < rule_alts.size(); ++r) {
    out += fmt::format("r{}_{} ::=", r, rule_names[r]);
    for (size_t a = 0; a < rule_alts[r].size(); ++a) {
      if (a) out += " |";
      for (uint32_t p = rule_alts[r][a]; elements[p].kind != ElemKind::kEndAlt; ++p) {
        const Element& e = elements[p];
        if (e.kind == ElemKind::kRule) {
          out += fmt::format(" r{}_{}", e.arg, rule_names[e.arg]);
          continue;
        }
        const ByteSet& s = byte_sets[e.arg];
        if (s.count() == 1) {
          for (int b = 0; b < 256; ++b)
            if (s.test(static_cast<uint8_t>(b)))
              out += (b >= 0x21 && b < 0x7f) ? fmt::format(" '{}'", static_cast<char>(b))
                                             : fmt::format(" x{:02x}", b);
        } else {
          out += fmt::format(" [{} bytes]", s.count());
        }
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace deepinfer::structured
