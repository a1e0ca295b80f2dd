// Chat-template parser: builds the syntax tree from the lexed segments by recursive descent.
#include <cctype>

#include "deepinfer/recipe/jinja.h"
#include "deepinfer/recipe/jinja_ast.h"
#include "deepinfer/recipe/jinja_lex.h"

namespace deepinfer::recipe::jinja {
namespace {

// ---- expressions ----
class ExprParser {
 public:
  explicit ExprParser(std::vector<Tok> toks) : t_(std::move(toks)) {}

  Result<std::unique_ptr<Expr>> parse_expr() {  // ternary: a if cond else b
    // Nesting is bounded so that a hostile template cannot exhaust the stack.
    if (++depth_ > kMaxDepth) return invalid_argument("chat template: expression nested too deeply");
    struct Leave { int* d; ~Leave() { --*d; } } leave{&depth_};
    DI_ASSIGN_OR_RETURN(auto e, parse_or());
    if (is_name("if")) {
      ++p_;
      DI_ASSIGN_OR_RETURN(auto cond, parse_or());
      std::unique_ptr<Expr> other;
      if (is_name("else")) {
        ++p_;
        DI_ASSIGN_OR_RETURN(other, parse_expr());
      } else {
        other = lit(Value());
      }
      e = node(Expr::Kind::kTernary, std::move(e), std::move(cond), std::move(other));
    }
    return e;
  }
  bool at_end() const { return t_[p_].kind == Tok::Kind::kEnd; }
  bool is_name(std::string_view n) const { return t_[p_].kind == Tok::Kind::kName && t_[p_].text == n; }
  bool is_op(std::string_view o) const { return t_[p_].kind == Tok::Kind::kOp && t_[p_].text == o; }
  Result<std::string> take_name() {
    if (t_[p_].kind != Tok::Kind::kName) return invalid_argument("chat template: expected a name, got '{}'", t_[p_].text);
    return t_[p_++].text;
  }
  Status expect_op(std::string_view o) {
    if (!is_op(o)) return invalid_argument("chat template: expected '{}', got '{}'", o, t_[p_].text);
    ++p_;
    return Status::ok();
  }
  Result<std::unique_ptr<Expr>> parse_or() { return parse_binary(0); }

 private:
  static std::unique_ptr<Expr> lit(Value v) {
    auto e = std::make_unique<Expr>();
    e->literal = std::move(v);
    return e;
  }
  template <typename... K>
  static std::unique_ptr<Expr> node(Expr::Kind k, K&&... kids) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    (e->kids.push_back(std::forward<K>(kids)), ...);
    return e;
  }

  // Levels: 0 or, 1 and, 2 not, 3 comparisons/in, 4 + -, 5 ~, 6 * / // %, 7 unary.
  Result<std::unique_ptr<Expr>> parse_binary(int level) {
    if (level == 2) {
      int nots = 0;  // counted, not recursed, so "not not ..." cannot exhaust the stack
      while (is_name("not")) { ++p_; ++nots; }
      DI_ASSIGN_OR_RETURN(auto e, parse_binary(3));
      if (nots > kMaxDepth) return invalid_argument("chat template: too many 'not's");
      for (int k = 0; k < nots; ++k) e = node(Expr::Kind::kNot, std::move(e));
      return e;
    }
    if (level == 7) return parse_unary();
    DI_ASSIGN_OR_RETURN(auto lhs, parse_binary(level + 1));
    for (int chain = 0;; ++chain) {
      if (chain > kMaxChain) return invalid_argument("chat template: operator chain too long");
      std::string op;
      if (level == 0 && is_name("or")) op = "or";
      else if (level == 1 && is_name("and")) op = "and";
      else if (level == 3) {
        for (const char* o : {"==", "!=", "<", ">", "<=", ">="})
          if (is_op(o)) op = o;
        if (is_name("in")) op = "in";
        if (is_name("not") && t_[p_ + 1].kind == Tok::Kind::kName && t_[p_ + 1].text == "in") {
          ++p_;
          op = "not in";
        }
      } else if (level == 4 && (is_op("+") || is_op("-"))) op = t_[p_].text;
      else if (level == 5 && is_op("~")) op = "~";
      else if (level == 6 && (is_op("*") || is_op("/") || is_op("//") || is_op("%"))) op = t_[p_].text;
      if (op.empty()) return lhs;
      ++p_;
      DI_ASSIGN_OR_RETURN(auto rhs, parse_binary(level + 1));
      lhs = node(Expr::Kind::kBinary, std::move(lhs), std::move(rhs));
      lhs->name = op;
    }
  }

  Result<std::unique_ptr<Expr>> parse_unary() {
    int negs = 0;
    while (is_op("-")) { ++p_; ++negs; }
    DI_ASSIGN_OR_RETURN(auto e, parse_postfix());
    if (negs > kMaxDepth) return invalid_argument("chat template: too many unary minus signs");
    for (int k = 0; k < negs; ++k) e = node(Expr::Kind::kNeg, std::move(e));
    for (int chain = 0; is_op("|") || is_name("is"); ++chain) {
      if (chain > kMaxChain) return invalid_argument("chat template: filter chain too long");
      bool filter = is_op("|");
      ++p_;
      auto f = node(filter ? Expr::Kind::kFilter : Expr::Kind::kTest, std::move(e));
      if (!filter && is_name("not")) { ++p_; f->negated = true; }
      DI_ASSIGN_OR_RETURN(f->name, take_name());
      if (is_op("(")) DI_RETURN_IF_ERROR(parse_args(f.get()));
      e = std::move(f);
    }
    return e;
  }

  Status parse_args(Expr* call) {
    DI_RETURN_IF_ERROR(expect_op("("));
    while (!is_op(")")) {
      if (t_[p_].kind == Tok::Kind::kName && t_[p_ + 1].kind == Tok::Kind::kOp && t_[p_ + 1].text == "=") {
        call->kwarg_names.push_back(t_[p_].text);
        p_ += 2;
      } else if (!call->kwarg_names.empty()) {
        return invalid_argument("chat template: positional argument after keyword argument");
      }
      DI_ASSIGN_OR_RETURN(auto a, parse_expr());
      call->kids.push_back(std::move(a));
      if (!is_op(",")) break;
      ++p_;
    }
    return expect_op(")");
  }

  Result<std::unique_ptr<Expr>> parse_postfix() {
    DI_ASSIGN_OR_RETURN(auto e, parse_primary());
    for (int chain = 0;; ++chain) {
      if (chain > kMaxChain) return invalid_argument("chat template: attribute/call chain too long");
      if (is_op(".")) {
        ++p_;
        auto a = node(Expr::Kind::kAttr, std::move(e), lit(Value()));
        DI_ASSIGN_OR_RETURN(a->name, take_name());
        e = std::move(a);
      } else if (is_op("[")) {
        ++p_;
        std::unique_ptr<Expr> start, stop;
        if (!is_op(":")) {
          DI_ASSIGN_OR_RETURN(start, parse_expr());
        }
        if (is_op(":")) {
          ++p_;
          if (!is_op("]")) {
            DI_ASSIGN_OR_RETURN(stop, parse_expr());
          }
          if (is_op(":")) return unsupported("chat template: slice steps are not supported");
          e = node(Expr::Kind::kSlice, std::move(e), start ? std::move(start) : lit(Value::none()),
                   stop ? std::move(stop) : lit(Value::none()));
        } else {
          e = node(Expr::Kind::kItem, std::move(e), std::move(start));
        }
        DI_RETURN_IF_ERROR(expect_op("]"));
      } else if (is_op("(")) {
        auto c = node(Expr::Kind::kCall, std::move(e));
        DI_RETURN_IF_ERROR(parse_args(c.get()));
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  Result<std::unique_ptr<Expr>> parse_primary() {
    const Tok& t = t_[p_];
    if (t.kind == Tok::Kind::kString) {
      ++p_;
      std::string s = t.text;
      while (t_[p_].kind == Tok::Kind::kString) s += t_[p_++].text;  // adjacent literals join
      return lit(Value::str(TaggedString::literal(std::move(s))));
    }
    if (t.kind == Tok::Kind::kInt) { ++p_; return lit(Value::integer(t.num)); }
    if (t.kind == Tok::Kind::kName) {
      ++p_;
      if (t.text == "true" || t.text == "True") return lit(Value::boolean(true));
      if (t.text == "false" || t.text == "False") return lit(Value::boolean(false));
      if (t.text == "none" || t.text == "None") return lit(Value::none());
      auto e = node(Expr::Kind::kName);
      e->name = t.text;
      return e;
    }
    if (is_op("(")) {
      ++p_;
      DI_ASSIGN_OR_RETURN(auto e, parse_expr());
      if (is_op(",")) return unsupported("chat template: tuples are not supported");
      DI_RETURN_IF_ERROR(expect_op(")"));
      return e;
    }
    if (is_op("[") || is_op("{")) {
      bool is_list = is_op("[");
      ++p_;
      auto e = node(is_list ? Expr::Kind::kList : Expr::Kind::kDict);
      while (!is_op(is_list ? "]" : "}")) {
        DI_ASSIGN_OR_RETURN(auto k, parse_expr());
        e->kids.push_back(std::move(k));
        if (!is_list) {
          DI_RETURN_IF_ERROR(expect_op(":"));
          DI_ASSIGN_OR_RETURN(auto v, parse_expr());
          e->kids.push_back(std::move(v));
        }
        if (!is_op(",")) break;
        ++p_;
      }
      DI_RETURN_IF_ERROR(expect_op(is_list ? "]" : "}"));
      return e;
    }
    return invalid_argument("chat template: unexpected '{}' in an expression", t.text);
  }

  static constexpr int kMaxDepth = 100;
  static constexpr int kMaxChain = 256;  // left-deep trees recurse when evaluated
  std::vector<Tok> t_;
  size_t p_ = 0;
  int depth_ = 0;
};

Result<std::unique_ptr<Expr>> parse_full_expr(const std::string& src) {
  DI_ASSIGN_OR_RETURN(auto toks, lex(src));
  ExprParser p(std::move(toks));
  DI_ASSIGN_OR_RETURN(auto e, p.parse_expr());
  if (!p.at_end()) return invalid_argument("chat template: trailing tokens in '{}'", src);
  return e;
}

// ---- statements ----
class StmtParser {
 public:
  explicit StmtParser(std::vector<Segment> segs) : s_(std::move(segs)) {}

  // Parses until one of `stops` (a statement keyword) or the end; *stop gets which.
  Result<std::unique_ptr<Node>> parse_body(std::initializer_list<std::string_view> stops,
                                           std::string* stop) {
    if (++depth_ > kMaxDepth) return invalid_argument("chat template: blocks nested too deeply");
    struct Leave { int* d; ~Leave() { --*d; } } leave{&depth_};
    auto body = std::make_unique<Node>();
    while (i_ < s_.size()) {
      Segment& seg = s_[i_];
      if (seg.kind == Segment::Kind::kText) {
        if (!seg.content.empty()) {
          auto n = std::make_unique<Node>();
          n->kind = Node::Kind::kText;
          n->text = TaggedString::literal(seg.content);
          body->children.push_back(std::move(n));
        }
        ++i_;
      } else if (seg.kind == Segment::Kind::kComment) {
        ++i_;
      } else if (seg.kind == Segment::Kind::kExpr) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        DI_ASSIGN_OR_RETURN(n->expr, parse_full_expr(seg.content));
        body->children.push_back(std::move(n));
        ++i_;
      } else {
        DI_ASSIGN_OR_RETURN(auto toks, lex(seg.content));
        if (toks.empty() || toks[0].kind != Tok::Kind::kName)
          return invalid_argument("chat template: empty statement tag");
        const std::string kw = toks[0].text;
        for (std::string_view s : stops) {
          if (kw == s) {
            *stop = kw;
            return body;
          }
        }
        ++i_;
        DI_ASSIGN_OR_RETURN(auto n, parse_statement(kw, std::move(toks)));
        body->children.push_back(std::move(n));
      }
    }
    if (stops.size() > 0) return invalid_argument("chat template: missing end tag ({})", *stops.begin());
    return body;
  }

 private:
  Result<std::unique_ptr<Node>> parse_statement(const std::string& kw, std::vector<Tok> toks) {
    auto n = std::make_unique<Node>();
    ExprParser p(std::move(toks));
    auto rest_after_keyword = [&]() { return p.take_name(); };
    DI_RETURN_IF_ERROR(rest_after_keyword().status());
    if (kw == "if") {
      n->kind = Node::Kind::kIf;
      DI_ASSIGN_OR_RETURN(auto cond, p.parse_expr());
      n->conditions.push_back(std::move(cond));
      while (true) {
        std::string stop;
        DI_ASSIGN_OR_RETURN(auto body, parse_body({"elif", "else", "endif"}, &stop));
        n->children.push_back(std::move(body));
        DI_ASSIGN_OR_RETURN(auto st, lex(s_[i_].content));
        ++i_;
        if (stop == "endif") break;
        ExprParser sp(std::move(st));
        DI_RETURN_IF_ERROR(sp.take_name().status());
        if (stop == "elif") {
          DI_ASSIGN_OR_RETURN(auto c, sp.parse_expr());
          n->conditions.push_back(std::move(c));
        } else {  // else: the last body
          DI_ASSIGN_OR_RETURN(auto eb, parse_body({"endif"}, &stop));
          n->children.push_back(std::move(eb));
          ++i_;
          break;
        }
      }
    } else if (kw == "for") {
      n->kind = Node::Kind::kFor;
      while (true) {
        DI_ASSIGN_OR_RETURN(auto v, p.take_name());
        n->targets.push_back(v);
        if (!p.is_op(",")) break;
        DI_RETURN_IF_ERROR(p.expect_op(","));
      }
      if (!p.is_name("in")) return invalid_argument("chat template: 'for' without 'in'");
      DI_RETURN_IF_ERROR(p.take_name().status());
      DI_ASSIGN_OR_RETURN(n->expr, p.parse_or());
      if (p.is_name("if")) {
        DI_RETURN_IF_ERROR(p.take_name().status());
        DI_ASSIGN_OR_RETURN(n->filter, p.parse_or());
      }
      if (p.is_name("recursive")) return unsupported("chat template: recursive loops are not supported");
      std::string stop;
      DI_ASSIGN_OR_RETURN(auto body, parse_body({"else", "endfor"}, &stop));
      n->children.push_back(std::move(body));
      ++i_;
      if (stop == "else") {
        DI_ASSIGN_OR_RETURN(auto eb, parse_body({"endfor"}, &stop));
        n->children.push_back(std::move(eb));
        ++i_;
      }
    } else if (kw == "set") {
      n->kind = Node::Kind::kSet;
      DI_ASSIGN_OR_RETURN(auto name, p.take_name());
      n->targets.push_back(name);
      if (p.is_op(".")) {
        DI_RETURN_IF_ERROR(p.expect_op("."));
        DI_ASSIGN_OR_RETURN(auto attr, p.take_name());
        n->targets.push_back(attr);
      }
      if (!p.is_op("=")) return unsupported("chat template: block 'set' is not supported");
      DI_RETURN_IF_ERROR(p.expect_op("="));
      DI_ASSIGN_OR_RETURN(n->expr, p.parse_expr());
    } else {
      return unsupported("chat template: statement '{}' is not supported", kw);
    }
    if (!p.at_end()) return invalid_argument("chat template: trailing tokens after '{}'", kw);
    return n;
  }

  static constexpr int kMaxDepth = 100;
  std::vector<Segment> s_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Template::Template() = default;
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

Result<Template> Template::parse(std::string_view source) {
  DI_ASSIGN_OR_RETURN(auto segs, split_segments(source));
  StmtParser p(std::move(segs));
  std::string stop;
  DI_ASSIGN_OR_RETURN(auto root, p.parse_body({}, &stop));
  Template t;
  t.root_ = std::shared_ptr<const Node>(std::move(root));
  return t;
}

}  // namespace deepinfer::recipe::jinja
