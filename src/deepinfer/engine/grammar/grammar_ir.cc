// GrammarBuilder lowering and freezing, plus the left-recursion check the matcher relies on.
#include "deepinfer/engine/grammar/grammar_ir.h"

#include <chrono>
#include <functional>

namespace deepinfer::engine::grammar {
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

Result<Grammar> GrammarBuilder::build(uint32_t root) const {
  DI_RETURN_IF_ERROR(check_budget());
  size_t n = rules_.size();
  if (root >= n) return invalid_argument("grammar: root rule {} does not exist", root);
  // Nullable rules (fixpoint), then the graph of non-tail calls reachable before any byte.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules_[r]) {
        bool all = true;
        for (const auto& e : alt)
          if (e.kind != ElemKind::kRule || !nullable[e.arg]) { all = false; break; }
        if (all) { nullable[r] = true; changed = true; break; }
      }
    }
  }
  std::vector<std::vector<uint32_t>> edges(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r])
      for (size_t i = 0; i < alt.size(); ++i) {
        const auto& e = alt[i];
        if (e.kind != ElemKind::kRule) break;
        if (e.arg >= n) return invalid_argument("grammar: rule {} calls unknown rule {}", r, e.arg);
        if (i + 1 < alt.size()) edges[r].push_back(e.arg);  // tail calls cannot grow the stack
        if (!nullable[e.arg]) break;
      }
  std::vector<uint8_t> color(n, 0);
  std::string cycle_rule;
  std::function<bool(uint32_t)> dfs = [&](uint32_t r) {
    color[r] = 1;
    for (uint32_t s : edges[r]) {
      if (color[s] == 1) { cycle_rule = names_[s]; return true; }
      if (color[s] == 0 && dfs(s)) return true;
    }
    color[r] = 2;
    return false;
  };
  for (uint32_t r = 0; r < n; ++r)
    if (color[r] == 0 && dfs(r))
      return unsupported("grammar: rule '{}' is left-recursive; rewrite it with repetition",
                         cycle_rule);

  Grammar g;
  g.byte_sets = byte_sets_;
  g.rule_names = names_;
  g.root = root;
  g.counted_chains = chains_;
  g.nullable.assign(nullable.begin(), nullable.end());
  g.rule_alts.resize(n);
  g.elements.reserve(num_elements_);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r]) {
      g.rule_alts[r].push_back(static_cast<uint32_t>(g.elements.size()));
      g.elements.insert(g.elements.end(), alt.begin(), alt.end());
      g.elements.push_back({ElemKind::kEndAlt, 0});
    }
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

}  // namespace deepinfer::engine::grammar
