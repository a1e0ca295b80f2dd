// Recursive-descent parser from ECMAScript regex syntax to RegexAst (see regex_ast.h).
#include "deepinfer/structured/automata/regex_ast.h"

#include <cctype>
#include <string>

namespace deepinfer::structured {
namespace {

constexpr int kMaxRepeat = 10000;
// The parser, the lowering and the automaton construction recurse over the syntax tree, so
// its depth is bounded: groups nested this deep, quantifiers stacked this many on one atom.
constexpr int kMaxGroupDepth = 256;
constexpr int kMaxStackedQuantifiers = 8;
using Kind = RegexNode::Kind;

class RegexParser {
 public:
  RegexParser(std::string_view p, bool search) : p_(p), search_(search) {}

  Result<RegexAst> parse_top() {
    while (true) {
      bool anchored_start = false, anchored_end = false;
      std::vector<RegexAst::Lookahead> looks;
      if (peek('^')) {
        ++i_;
        anchored_start = true;
        // Lookaheads right after a top-level `^` constrain the whole string from its start.
        while (lookaround_at(i_) && p_[i_ + 2] != '<') {
          bool negative = p_[i_ + 2] == '!';
          i_ += 3;
          DI_ASSIGN_OR_RETURN(int inner, parse_alt());
          if (!peek(')')) return error("missing ')'");
          ++i_;
          if (i_ < p_.size() && std::string_view("*+?{").find(p_[i_]) != std::string_view::npos)
            return refuse("quantified lookahead");
          looks.push_back({add(RegexNode::of(Kind::kConcat, {inner, any_star()})), negative});
        }
      }
      DI_ASSIGN_OR_RETURN(std::vector<int> body, parse_concat(/*top=*/true));
      if (peek('$')) {
        ++i_;
        anchored_end = true;
      }
      std::vector<int> seq;
      if (search_ && !anchored_start) seq.push_back(any_star());
      seq.insert(seq.end(), body.begin(), body.end());
      if (search_ && !anchored_end) seq.push_back(any_star());
      ast_.branches.push_back(add(RegexNode::of(Kind::kConcat, std::move(seq))));
      ast_.lookaheads.push_back(std::move(looks));
      if (i_ >= p_.size()) break;
      if (p_[i_] != '|') return error("unexpected character");
      ++i_;
    }
    return std::move(ast_);
  }

 private:
  int add(RegexNode n) {
    ast_.nodes.push_back(std::move(n));
    return static_cast<int>(ast_.nodes.size()) - 1;
  }
  int cls(const CodePointSet& s) { return add(RegexNode::of_class(s)); }
  int any_star() {
    int c = cls(CodePointSet::any());
    return add(RegexNode::of(Kind::kRepeat, {c}, 0, -1));
  }
  bool peek(char c) const { return i_ < p_.size() && p_[i_] == c; }
  // `(?=`, `(?!`, `(?<=` or `(?<!` at offset `at`.
  bool lookaround_at(size_t at) const {
    std::string_view r = p_.substr(std::min(at, p_.size()));
    return r.starts_with("(?=") || r.starts_with("(?!") || r.starts_with("(?<=") ||
           r.starts_with("(?<!");
  }
  Status error(std::string_view what) const {
    return invalid_argument("regex '{}': {} at offset {}", p_, what, i_);
  }
  Status refuse(std::string_view what) const {
    return unsupported("regex '{}': {} (offset {}) is not supported", p_, what, i_);
  }

  Result<int> parse_alt() {
    std::vector<int> alts;
    while (true) {
      DI_ASSIGN_OR_RETURN(std::vector<int> seq, parse_concat(false));
      alts.push_back(add(RegexNode::of(Kind::kConcat, std::move(seq))));
      if (!peek('|')) break;
      ++i_;
    }
    return add(RegexNode::of(Kind::kAlt, std::move(alts)));
  }

  Result<std::vector<int>> parse_concat(bool top) {
    std::vector<int> seq;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$' && top && (i_ + 1 == p_.size() || p_[i_ + 1] == '|')) break;
      if (p_[i_] == '^' || p_[i_] == '$') {
        // Inside the pattern: a zero-width assertion. Not quantifiable (ECMAScript).
        seq.push_back(add(RegexNode::of(p_[i_] == '^' ? Kind::kStart : Kind::kEnd)));
        ast_.has_assertions = true;
        ++i_;
        if (i_ < p_.size() && std::string_view("*+?{").find(p_[i_]) != std::string_view::npos)
          return error("quantified anchor");
        continue;
      }
      if (top && search_ && p_.substr(i_).starts_with("(?=")) {
        // A lookahead ending an unanchored top-level branch: R(?=Y)[^]* == RY[^]*.
        i_ += 3;
        DI_ASSIGN_OR_RETURN(int inner, parse_alt());
        if (!peek(')')) return error("missing ')'");
        ++i_;
        if (i_ < p_.size() && p_[i_] != '|') return refuse("lookahead inside the pattern");
        seq.push_back(inner);
        continue;
      }
      DI_ASSIGN_OR_RETURN(int atom, parse_atom());
      DI_ASSIGN_OR_RETURN(int rep, parse_quantifier(atom));
      seq.push_back(rep);
      if (ast_.nodes.size() > 200'000) return refuse("a pattern this large");
    }
    if (top && peek(')')) return error("unbalanced ')'");
    return seq;
  }

  Result<int> parse_quantifier(int atom) {
    for (int stacked = 0; i_ < p_.size(); ++stacked) {
      int64_t lo, hi;
      char c = p_[i_];
      if (c == '*') {
        lo = 0;
        hi = -1;
        ++i_;
      } else if (c == '+') {
        lo = 1;
        hi = -1;
        ++i_;
      } else if (c == '?') {
        lo = 0;
        hi = 1;
        ++i_;
      } else if (c == '{') {
        size_t save = i_;
        ++i_;
        auto num = [&](int64_t& out) {
          size_t st = i_;
          out = 0;
          while (i_ < p_.size() && isdigit(static_cast<unsigned char>(p_[i_])) && out <= kMaxRepeat)
            out = out * 10 + (p_[i_++] - '0');
          return i_ > st;
        };
        if (!num(lo)) {
          i_ = save;
          return atom;
        }  // a literal '{'
        hi = lo;
        if (peek(',')) {
          ++i_;
          if (!num(hi)) hi = -1;
        }
        if (!peek('}')) return error("malformed {m,n} quantifier");
        ++i_;
        if (lo > kMaxRepeat || hi > kMaxRepeat) return refuse("a repetition count above 10000");
        if (hi >= 0 && hi < lo) return error("{m,n} with n < m");
      } else {
        return atom;
      }
      if (peek('?'))
        ++i_;  // lazy: same language
      else if (peek('+'))
        return refuse("possessive quantifier");
      if (stacked == kMaxStackedQuantifiers) return error("more than 8 quantifiers in a row");
      atom = add(RegexNode::of(Kind::kRepeat, {atom}, lo, hi));
    }
    return atom;
  }

  Result<int> parse_atom() {
    char c = p_[i_];
    if (c == '(') {
      if (group_depth_ >= kMaxGroupDepth) return error("groups nested more than 256 deep");
      ++group_depth_;
      auto group = parse_group();
      --group_depth_;
      return group;
    }
    return parse_plain_atom(c);
  }

  // A group at '(' (parse_atom bounds how deep groups nest).
  Result<int> parse_group() {
    ++i_;
    if (peek('?')) {
      ++i_;
      if (peek(':'))
        ++i_;
      else if (peek('<') && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
        while (i_ < p_.size() && p_[i_] != '>') ++i_;
        ++i_;
      } else {
        return refuse("lookaround or inline flag group");
      }
    }
    DI_ASSIGN_OR_RETURN(int inner, parse_alt());
    if (!peek(')')) return error("missing ')'");
    ++i_;
    return inner;
  }

  Result<int> parse_plain_atom(char c) {
    if (c == '[') return parse_class();
    if (c == '.') {
      ++i_;
      CodePointSet s;
      s.add('\n');
      s.add('\r');
      s.add(0x2028, 0x2029);
      return cls(s.complement());
    }
    if (c == '\\') {
      DI_ASSIGN_OR_RETURN(CodePointSet s, parse_escape(false));
      return cls(s);
    }
    if (c == '*' || c == '+' || c == '?') return error("quantifier without an operand");
    uint32_t cp = 0;
    DI_RETURN_IF_ERROR(next_utf8(cp));
    CodePointSet s;
    s.add(cp);
    return cls(s);
  }

  Status next_utf8(uint32_t& cp) {
    unsigned char c = static_cast<unsigned char>(p_[i_]);
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (i_ + n > p_.size()) return error("truncated UTF-8");
    cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(p_[i_ + k]) & 0x3F);
    i_ += n;
    return Status::ok();
  }

  int hex_value(size_t at, int digits) const {
    if (at + digits > p_.size()) return -1;
    int v = 0;
    for (int k = 0; k < digits; ++k) {
      char h = p_[at + k];
      int d = isdigit(static_cast<unsigned char>(h)) ? h - '0'
              : (h >= 'a' && h <= 'f')               ? h - 'a' + 10
              : (h >= 'A' && h <= 'F')               ? h - 'A' + 10
                                                     : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  }

  Result<CodePointSet> parse_escape(bool in_class) {
    ++i_;  // backslash
    if (i_ >= p_.size()) return error("trailing backslash");
    char e = p_[i_++];
    CodePointSet s;
    switch (e) {
      case 'd':
        return CodePointSet::digit();
      case 'D':
        return CodePointSet::digit().complement();
      case 'w':
        return CodePointSet::word();
      case 'W':
        return CodePointSet::word().complement();
      case 's':
        return CodePointSet::space();
      case 'S':
        return CodePointSet::space().complement();
      case 'n':
        s.add('\n');
        return s;
      case 't':
        s.add('\t');
        return s;
      case 'r':
        s.add('\r');
        return s;
      case 'f':
        s.add('\f');
        return s;
      case 'v':
        s.add('\v');
        return s;
      case '0':
        s.add(0);
        return s;
      case 'b':
        if (in_class) {
          s.add('\b');
          return s;
        }
        return refuse("word boundary \\b");
      case 'B':
        return refuse("\\B");
      case 'p':
      case 'P':
        return refuse("Unicode property escape");
      case 'x': {
        int v = hex_value(i_, 2);
        if (v < 0) return error("bad \\x escape");
        i_ += 2;
        s.add(v);
        return s;
      }
      case 'u': {
        int v = -1;
        if (peek('{')) {
          size_t end = p_.find('}', i_);
          if (end != std::string_view::npos && end - i_ - 1 <= 6)
            v = hex_value(i_ + 1, end - i_ - 1);
          if (v >= 0) i_ = end + 1;
        } else {
          v = hex_value(i_, 4);
          if (v >= 0) i_ += 4;
        }
        if (v < 0) return error("bad \\u escape");
        s.add(v);
        return s;
      }
      default:
        if (isdigit(static_cast<unsigned char>(e))) return refuse("backreference");
        if (isalpha(static_cast<unsigned char>(e))) return refuse(std::string("escape \\") + e);
        --i_;
        uint32_t cp = 0;
        DI_RETURN_IF_ERROR(next_utf8(cp));
        s.add(cp);
        return s;
    }
  }

  Result<int> parse_class() {
    ++i_;  // [
    bool negate = peek('^');
    if (negate) ++i_;
    CodePointSet s;
    while (i_ < p_.size() && p_[i_] != ']') {  // ECMAScript: "[]" is the empty class
      CodePointSet item;
      uint32_t lo = 0;
      bool single = false;
      if (p_[i_] == '\\') {
        DI_ASSIGN_OR_RETURN(item, parse_escape(true));
        if (item.ranges().size() == 1 && item.ranges()[0].first == item.ranges()[0].second) {
          single = true;
          lo = item.ranges()[0].first;
        }
      } else {
        DI_RETURN_IF_ERROR(next_utf8(lo));
        single = true;
      }
      if (single && peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi = 0;
        if (p_[i_] == '\\') {
          DI_ASSIGN_OR_RETURN(CodePointSet h, parse_escape(true));
          if (h.ranges().size() != 1 || h.ranges()[0].first != h.ranges()[0].second)
            return error("class range ends in a class escape");
          hi = h.ranges()[0].first;
        } else {
          DI_RETURN_IF_ERROR(next_utf8(hi));
        }
        if (hi < lo) return error("class range out of order");
        s.add(lo, hi);
      } else if (single) {
        s.add(lo);
      } else {
        s.add(item);
      }
    }
    if (!peek(']')) return error("missing ']'");
    ++i_;
    return cls(negate ? s.complement() : s);
  }

  std::string_view p_;
  bool search_;
  size_t i_ = 0;
  int group_depth_ = 0;
  RegexAst ast_;
};

}  // namespace

Result<RegexAst> parse_regex(std::string_view pattern, bool search) {
  RegexParser parser(pattern, search);
  return parser.parse_top();
}

}  // namespace deepinfer::structured
