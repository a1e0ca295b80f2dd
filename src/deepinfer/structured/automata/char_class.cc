// Code-point set algebra and UTF-8 range lowering (see char_class.h).
#include "deepinfer/structured/automata/char_class.h"

#include <algorithm>

#include <fmt/format.h>

namespace deepinfer::structured {
namespace {
constexpr uint32_t kMaxCp = 0x10FFFF;

// Byte-range sequences for code points [lo, hi] that all encode to n bytes.
void utf8_ranges(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  static const uint32_t kBounds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCp};
  for (int n = 0; n < 4; ++n) {
    uint32_t blo = n == 0 ? 0 : kBounds[n - 1] + 1, bhi = kBounds[n];
    if (hi < blo || lo > bhi) continue;
    uint32_t a = std::max(lo, blo), z = std::min(hi, bhi);
    // Split until every continuation position spans a full or single-prefix block. The
    // halves stay within this length's block; longer encodings are the next iterations'.
    bool split = false;
    for (int i = 1; i <= n && !split; ++i) {
      uint32_t m = (1u << (6 * i)) - 1;
      if ((a & ~m) == (z & ~m)) continue;
      if ((a & m) != 0) {
        utf8_ranges(a, a | m, out);
        utf8_ranges((a | m) + 1, z, out);
        split = true;
      } else if ((z & m) != m) {
        utf8_ranges(a, (z & ~m) - 1, out);
        utf8_ranges(z & ~m, z, out);
        split = true;
      }
    }
    if (split) continue;
    std::string ea = utf8_encode(a), ez = utf8_encode(z);
    std::vector<std::pair<uint8_t, uint8_t>> seq;
    for (size_t k = 0; k < ea.size(); ++k)
      seq.emplace_back(static_cast<uint8_t>(ea[k]), static_cast<uint8_t>(ez[k]));
    out.push_back(std::move(seq));
  }
}
}  // namespace

void CodePointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.emplace_back(lo, std::min(hi, kMaxCp));
  normalize();
}

void CodePointSet::add(const CodePointSet& o) {
  ranges_.insert(ranges_.end(), o.ranges_.begin(), o.ranges_.end());
  normalize();
}

void CodePointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (auto r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  ranges_ = std::move(merged);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet c;
  uint32_t next = 0;
  for (auto [lo, hi] : ranges_) {
    if (lo > next) c.ranges_.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCp) c.ranges_.emplace_back(next, kMaxCp);
  return c;
}

CodePointSet CodePointSet::ignore_case() const {
  CodePointSet c = *this;
  for (uint32_t ch = 'a'; ch <= 'z'; ++ch) {
    if (contains(ch)) c.add(ch - 32);
    if (contains(ch - 32)) c.add(ch);
  }
  return c;
}

bool CodePointSet::contains(uint32_t cp) const {
  for (auto [lo, hi] : ranges_)
    if (cp >= lo && cp <= hi) return true;
  return false;
}

CodePointSet CodePointSet::any() {
  CodePointSet s;
  s.add(0, kMaxCp);
  return s;
}
CodePointSet CodePointSet::digit() {
  CodePointSet s;
  s.add('0', '9');
  return s;
}
CodePointSet CodePointSet::word() {
  CodePointSet s;
  s.add('0', '9');
  s.add('A', 'Z');
  s.add('a', 'z');
  s.add('_');
  return s;
}
CodePointSet CodePointSet::space() {
  CodePointSet s;
  s.add('\t', '\r');
  s.add(' ');
  s.add(0xA0);
  s.add(0x1680);
  s.add(0x2000, 0x200A);
  s.add(0x2028, 0x2029);
  s.add(0x202F);
  s.add(0x205F);
  s.add(0x3000);
  s.add(0xFEFF);
  return s;
}

namespace {
using ByteSeq = std::vector<ByteSet>;

// Left-factors alternatives of byte-set sequences (sequences with equal first sets share one
// element, equal tails merge their first sets), so a parser at a character boundary holds a
// handful of stacks instead of one per UTF-8 range or escape.
std::vector<Sequence> factor(GrammarBuilder& b, const std::vector<ByteSeq>& seqs) {
  std::vector<std::pair<ByteSet, std::vector<ByteSeq>>> groups;
  ByteSet single;
  bool has_empty = false;
  for (const auto& s : seqs) {
    if (s.empty()) { has_empty = true; continue; }
    if (s.size() == 1) {
      for (int i = 0; i < 4; ++i) single.bits[i] |= s[0].bits[i];
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == s[0]; });
    if (it == groups.end()) {
      groups.emplace_back(s[0], std::vector<ByteSeq>{});
      it = groups.end() - 1;
    }
    it->second.emplace_back(s.begin() + 1, s.end());
  }
  // (A|B) t == [AB] t: merge groups whose tails are the same.
  for (size_t i = 0; i < groups.size(); ++i)
    for (size_t j = i + 1; j < groups.size();) {
      if (groups[j].second == groups[i].second) {
        for (int w = 0; w < 4; ++w) groups[i].first.bits[w] |= groups[j].first.bits[w];
        groups.erase(groups.begin() + j);
      } else {
        ++j;
      }
    }
  std::vector<Sequence> alts;
  if (!single.empty()) alts.push_back({b.bytes(single)});
  for (const auto& [first, tails] : groups) {
    Sequence alt = {b.bytes(first)};
    if (tails.size() == 1) {
      for (const auto& x : tails[0]) alt.push_back(b.bytes(x));
    } else {
      alt.push_back(GrammarBuilder::call(b.rule_with_alts("char_tail", factor(b, tails))));
    }
    alts.push_back(std::move(alt));
  }
  if (has_empty) alts.push_back({});
  return alts;
}

ByteSeq literal_seq(const std::string& text) {
  ByteSeq out;
  for (char c : text) {
    ByteSet s;
    s.set(static_cast<uint8_t>(c));
    out.push_back(s);
  }
  return out;
}
}  // namespace

Element char_class(GrammarBuilder& b, const CodePointSet& set, bool json_string) {
  std::vector<ByteSeq> seqs;
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> ranges;
  for (auto [lo, hi] : set.ranges()) {
    // Surrogates are not scalar values and never appear in UTF-8 text.
    uint32_t a = lo, z = hi;
    if (a <= 0xDFFF && z >= 0xD800) {
      if (a < 0xD800) utf8_ranges(a, 0xD7FF, ranges);
      if (z > 0xDFFF) utf8_ranges(0xE000, z, ranges);
    } else {
      utf8_ranges(a, z, ranges);
    }
  }
  for (const auto& r : ranges) {
    ByteSeq s;
    for (auto [x, y] : r) {
      ByteSet bs;
      for (int c = x; c <= y; ++c) {
        if (r.size() == 1 && json_string && (c < 0x20 || c == '"' || c == '\\')) continue;
        bs.set(static_cast<uint8_t>(c));
      }
      s.push_back(bs);
    }
    if (!s[0].empty()) seqs.push_back(std::move(s));
  }
  if (json_string) {
    // The escapes a standard serializer writes (nlohmann::json, Python json with ensure_ascii off).
    for (uint32_t c = 0; c < 0x20; ++c) {
      if (!set.contains(c)) continue;
      const char* short_form = c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n"
                             : c == '\r' ? "\\r" : c == '\t' ? "\\t" : nullptr;
      seqs.push_back(literal_seq(short_form ? std::string(short_form) : fmt::format("\\u{:04x}", c)));
    }
    if (set.contains('"')) seqs.push_back(literal_seq("\\\""));
    if (set.contains('\\')) seqs.push_back(literal_seq("\\\\"));
  }
  return GrammarBuilder::call(b.rule_with_alts("char", factor(b, seqs)));
}

Element json_string_char(GrammarBuilder& b) { return char_class(b, CodePointSet::any(), true); }

}  // namespace deepinfer::structured
