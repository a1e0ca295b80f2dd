// Recursive-descent GBNF parser (see ebnf_parser.h). Errors give line and column.
#include "deepinfer/structured/ebnf_parser.h"

#include <map>
#include <string>

#include "deepinfer/structured/automata/char_class.h"

namespace deepinfer::structured {
namespace {

bool is_name_char(char c) { return isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

class EbnfParser {
 public:
  EbnfParser(std::string_view src, const GrammarLimits& l) : s_(src), b_(l) {}

  Result<Grammar> run() {
    skip_space();
    while (i_ < s_.size()) {
      std::string name = read_name();
      if (name.empty()) return error("expected a rule name");
      skip_space();
      if (s_.substr(i_, 3) != "::=") return error("expected '::=' after rule name");
      i_ += 3;
      uint32_t r = rule_id(name);
      if (defined_.count(name)) return error("rule '" + name + "' is defined twice");
      defined_[name] = true;
      DI_ASSIGN_OR_RETURN(std::vector<Sequence> alts, parse_alts(false));
      for (auto& a : alts) b_.add_alt(r, std::move(a));
      DI_RETURN_IF_ERROR(b_.check_budget());
    }
    for (const auto& [name, id] : ids_)
      if (!defined_.count(name)) return invalid_argument("ebnf: rule '{}' is used but not defined", name);
    if (!ids_.count("root")) return invalid_argument("ebnf: no 'root' rule");
    return b_.build(ids_["root"],
                    "ebnf: rule 'root' matches no string (every way through it needs a rule that "
                    "never ends, such as rules that only call each other, or an empty character "
                    "class)");
  }

 private:
  Status error(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') { ++line; col = 1; } else { ++col; }
    }
    return invalid_argument("ebnf: {} at line {} column {}", what, line, col);
  }
  void skip_space() {
    while (i_ < s_.size()) {
      if (isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
      else if (s_[i_] == '#') while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      else break;
    }
  }
  std::string read_name() {
    size_t st = i_;
    while (i_ < s_.size() && is_name_char(s_[i_])) ++i_;
    return std::string(s_.substr(st, i_ - st));
  }
  uint32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    uint32_t r = b_.new_rule(name);
    ids_[name] = r;
    return r;
  }
  // A rule body ends at the next `name ::=` (or EOF); a group ends at ')'.
  bool at_rule_start() {
    size_t save = i_;
    std::string n = read_name();
    skip_space();
    bool yes = !n.empty() && s_.substr(i_, 3) == "::=";
    i_ = save;
    return yes;
  }

  Result<std::vector<Sequence>> parse_alts(bool nested) {
    std::vector<Sequence> alts(1);
    while (true) {
      skip_space();
      if (i_ >= s_.size()) break;
      char c = s_[i_];
      if (c == ')') {
        if (!nested) return error("unbalanced ')'");
        break;
      }
      if (c == '|') { ++i_; alts.emplace_back(); continue; }
      if (!nested && at_rule_start()) break;
      DI_ASSIGN_OR_RETURN(Sequence atom, parse_atom());
      DI_ASSIGN_OR_RETURN(Sequence rep, parse_repeat(std::move(atom)));
      alts.back().insert(alts.back().end(), rep.begin(), rep.end());
    }
    return alts;
  }

  Result<Sequence> parse_repeat(Sequence atom) {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '*') { ++i_; atom = {b_.star(atom)}; }
      else if (c == '+') { ++i_; atom = {b_.plus(atom)}; }
      else if (c == '?') { ++i_; atom = {b_.optional(atom)}; }
      else if (c == '{') {
        ++i_;
        auto num = [&](int64_t& v) {
          size_t st = i_;
          v = 0;
          while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_])) && v < 100000)
            v = v * 10 + (s_[i_++] - '0');
          return i_ > st;
        };
        int64_t lo, hi;
        skip_space();
        if (!num(lo)) return error("expected a number in {m,n}");
        hi = lo;
        skip_space();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          skip_space();
          if (!num(hi)) hi = -1;
          skip_space();
        }
        if (i_ >= s_.size() || s_[i_] != '}') return error("expected '}'");
        ++i_;
        if (hi >= 0 && hi < lo) return error("{m,n} with n < m");
        if (lo > 10000 || hi > 10000) return error("repetition count above 10000");
        atom = {b_.repeat(atom, lo, hi)};
      } else {
        break;
      }
    }
    return atom;
  }

  Result<uint32_t> read_char() {
    if (i_ >= s_.size()) return error("unexpected end of input");
    unsigned char c = static_cast<unsigned char>(s_[i_]);
    if (c == '\\') {
      if (++i_ >= s_.size()) return error("trailing backslash");
      char e = s_[i_++];
      auto hex = [&](int n) -> Result<uint32_t> {
        uint32_t v = 0;
        for (int k = 0; k < n; ++k, ++i_) {
          if (i_ >= s_.size() || !isxdigit(static_cast<unsigned char>(s_[i_]))) return error("bad hex escape");
          char h = s_[i_];
          v = v * 16 + (isdigit(static_cast<unsigned char>(h)) ? h - '0' : (tolower(h) - 'a' + 10));
        }
        return v;
      };
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 't': return uint32_t{'\t'};
        case 'r': return uint32_t{'\r'};
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        default: return static_cast<uint32_t>(static_cast<unsigned char>(e));
      }
    }
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (i_ + n > s_.size()) return error("truncated UTF-8");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s_[i_ + k]) & 0x3F);
    i_ += n;
    return cp;
  }

  Result<Sequence> parse_atom() {
    char c = s_[i_];
    if (c == '"') {
      ++i_;
      Sequence seq;
      while (i_ < s_.size() && s_[i_] != '"') {
        DI_ASSIGN_OR_RETURN(uint32_t cp, read_char());
        Sequence lit = b_.literal(utf8_encode(cp));
        seq.insert(seq.end(), lit.begin(), lit.end());
      }
      if (i_ >= s_.size()) return error("unterminated string literal");
      ++i_;
      return seq;
    }
    if (c == '[') {
      ++i_;
      bool neg = i_ < s_.size() && s_[i_] == '^';
      if (neg) ++i_;
      CodePointSet set;
      while (i_ < s_.size() && s_[i_] != ']') {
        DI_ASSIGN_OR_RETURN(uint32_t lo, read_char());
        uint32_t hi = lo;
        if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
          ++i_;
          DI_ASSIGN_OR_RETURN(hi, read_char());
          if (hi < lo) return error("character range out of order");
        }
        set.add(lo, hi);
      }
      if (i_ >= s_.size()) return error("unterminated character class");
      ++i_;
      return Sequence{char_class(b_, neg ? set.complement() : set, false)};
    }
    if (c == '.') {
      ++i_;
      return Sequence{char_class(b_, CodePointSet::any(), false)};
    }
    if (c == '(') {
      // Groups are parsed by recursion: a hostile depth must not overflow the thread's stack.
      if (++group_depth_ > kMaxGroupDepth)
        return error(fmt::format("groups nested more than {} deep", kMaxGroupDepth));
      ++i_;
      auto parsed = parse_alts(true);
      --group_depth_;
      DI_ASSIGN_OR_RETURN(std::vector<Sequence> alts, std::move(parsed));
      if (i_ >= s_.size() || s_[i_] != ')') return error("missing ')'");
      ++i_;
      return Sequence{GrammarBuilder::call(b_.rule_with_alts("group", std::move(alts)))};
    }
    if (is_name_char(c)) return Sequence{GrammarBuilder::call(rule_id(read_name()))};
    return error(std::string("unexpected character '") + c + "'");
  }

  static constexpr int kMaxGroupDepth = 256;
  std::string_view s_;
  GrammarBuilder b_;
  size_t i_ = 0;
  int group_depth_ = 0;
  std::map<std::string, uint32_t> ids_;
  std::map<std::string, bool> defined_;
};

}  // namespace

Result<Grammar> compile_ebnf(std::string_view source, const GrammarLimits& limits) {
  EbnfParser p(source, limits);
  return p.run();
}

}  // namespace deepinfer::structured
