// Chat-template lexing (see jinja_lex.h).
#include "deepinfer/recipe/jinja_lex.h"

#include <cctype>

namespace deepinfer::recipe::jinja {

Result<std::vector<Segment>> split_segments(std::string_view src) {
  std::vector<Segment> segs;
  size_t pos = 0;
  while (pos < src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string_view::npos && open + 1 < src.size() &&
           src[open + 1] != '{' && src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open == std::string_view::npos || open + 1 >= src.size()) {
      segs.push_back({Segment::Kind::kText, std::string(src.substr(pos))});
      break;
    }
    if (open > pos) segs.push_back({Segment::Kind::kText, std::string(src.substr(pos, open - pos))});
    char c = src[open + 1];
    const char* close = c == '{' ? "}}" : c == '%' ? "%}" : "#}";
    size_t end = src.find(close, open + 2);
    if (end == std::string_view::npos)
      return invalid_argument("chat template: unclosed '{{{}' at offset {}", c, open);
    Segment s{c == '{' ? Segment::Kind::kExpr : c == '%' ? Segment::Kind::kStmt : Segment::Kind::kComment, {}};
    std::string_view inner = src.substr(open + 2, end - open - 2);
    if (!inner.empty() && inner.front() == '-') { s.strip_before = true; inner.remove_prefix(1); }
    else if (!inner.empty() && inner.front() == '+') { s.keep_before = true; inner.remove_prefix(1); }
    if (!inner.empty() && inner.back() == '-') { s.strip_after = true; inner.remove_suffix(1); }
    else if (!inner.empty() && inner.back() == '+') { inner.remove_suffix(1); }
    s.content = std::string(inner);
    segs.push_back(std::move(s));
    pos = end + 2;
  }
  // Whitespace control, as jinja2.Environment(trim_blocks=True, lstrip_blocks=True).
  auto is_ws = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; };
  for (size_t i = 0; i < segs.size(); ++i) {
    Segment& s = segs[i];
    if (s.kind == Segment::Kind::kText) continue;
    bool block = s.kind != Segment::Kind::kExpr;
    if (i > 0 && segs[i - 1].kind == Segment::Kind::kText) {
      std::string& t = segs[i - 1].content;
      if (s.strip_before) {
        while (!t.empty() && is_ws(t.back())) t.pop_back();
      } else if (block && !s.keep_before) {
        size_t k = t.size();
        while (k > 0 && (t[k - 1] == ' ' || t[k - 1] == '\t')) --k;
        if ((k == 0 && i == 1) || (k > 0 && t[k - 1] == '\n')) t.resize(k);
      }
    }
    if (i + 1 < segs.size() && segs[i + 1].kind == Segment::Kind::kText) {
      std::string& t = segs[i + 1].content;
      if (s.strip_after) {
        size_t k = 0;
        while (k < t.size() && is_ws(t[k])) ++k;
        t.erase(0, k);
      } else if (block && !t.empty() && t[0] == '\n') {
        t.erase(0, 1);
      }
    }
  }
  return segs;
}

Result<std::vector<Tok>> lex(std::string_view s) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Tok::Kind::kName, std::string(s.substr(i, j - i))});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && s[j] == '.' && j + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[j + 1])))
        return unsupported("chat template: floating-point literals are not supported");
      if (j - i > 18) return invalid_argument("chat template: integer literal too long");
      out.push_back({Tok::Kind::kInt, std::string(s.substr(i, j - i)), std::stoll(std::string(s.substr(i, j - i)))});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          char e = s[++j];
          v.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e);
        } else {
          v.push_back(s[j]);
        }
      }
      if (j >= s.size()) return invalid_argument("chat template: unterminated string literal");
      out.push_back({Tok::Kind::kString, std::move(v)});
      i = j + 1;
    } else {
      static const char* kOps[] = {"==", "!=", "<=", ">=", "//", "**", "(", ")", "[", "]", "{", "}",
                                   ",", ".", ":", "|", "~", "+", "-", "*", "/", "%", "<", ">", "="};
      bool found = false;
      for (const char* op : kOps) {
        std::string_view o(op);
        if (s.substr(i, o.size()) == o) {
          out.push_back({Tok::Kind::kOp, std::string(o)});
          i += o.size();
          found = true;
          break;
        }
      }
      if (!found) return invalid_argument("chat template: unexpected character '{}'", c);
    }
  }
  out.push_back({Tok::Kind::kEnd, ""});
  return out;
}

}  // namespace deepinfer::recipe::jinja
