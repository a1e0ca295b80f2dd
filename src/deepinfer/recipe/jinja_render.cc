// Chat-template evaluation: scopes, loop variables, filters, tests and the few methods chat
// templates call. Strings keep their trusted/untrusted tags through every operation.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "deepinfer/recipe/jinja.h"
#include "deepinfer/recipe/jinja_ast.h"

namespace deepinfer::recipe::jinja {
namespace {

bool truthy(const Value& v) {
  if (v.is_bool()) return std::get<bool>(v.v);
  if (v.is_int()) return std::get<int64_t>(v.v) != 0;
  if (v.is_str()) return !v.as_str().text.empty();
  if (v.is_list()) return !v.as_list().empty();
  if (v.is_dict()) return !v.as_dict().empty();
  return false;
}

nlohmann::json to_json(const Value& v) {
  if (v.is_bool()) return std::get<bool>(v.v);
  if (v.is_int()) return std::get<int64_t>(v.v);
  if (v.is_str()) return v.as_str().text;
  if (v.is_list()) {
    auto a = nlohmann::json::array();
    for (const auto& x : v.as_list()) a.push_back(to_json(x));
    return a;
  }
  if (v.is_dict()) {
    auto o = nlohmann::json::object();
    for (const auto& [k, x] : v.as_dict()) o[k] = to_json(x);
    return o;
  }
  return nullptr;
}

// Python str() of a value; only strings keep their tags (numbers etc. are data).
TaggedString to_text(const Value& v) {
  if (v.is_str()) return v.as_str();
  if (v.is_undefined()) return {};
  if (v.is_none()) return TaggedString::data("None");
  if (v.is_bool()) return TaggedString::data(std::get<bool>(v.v) ? "True" : "False");
  if (v.is_int()) return TaggedString::data(std::to_string(std::get<int64_t>(v.v)));
  return TaggedString::data(to_json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

bool equal(const Value& a, const Value& b) {
  if (a.is_str() && b.is_str()) return a.as_str().text == b.as_str().text;
  if ((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool())) {
    auto n = [](const Value& x) { return x.is_int() ? std::get<int64_t>(x.v) : int64_t(std::get<bool>(x.v)); };
    return n(a) == n(b);
  }
  if ((a.is_none() || a.is_undefined()) && (b.is_none() || b.is_undefined()))
    return a.is_none() == b.is_none();
  if (a.is_list() && b.is_list()) {
    const auto &x = a.as_list(), &y = b.as_list();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equal(x[i], y[i])) return false;
    return true;
  }
  return false;
}

TaggedString strip(const TaggedString& s, bool left, bool right, std::string_view chars = " \t\n\r\v\f") {
  size_t b = 0, e = s.text.size();
  if (left) while (b < e && chars.find(s.text[b]) != std::string_view::npos) ++b;
  if (right) while (e > b && chars.find(s.text[e - 1]) != std::string_view::npos) --e;
  return s.substr(b, e);
}

class Renderer {
 public:
  explicit Renderer(const Dict& globals) { scopes_.push_back(globals); }

  Status render(const Node& n, TaggedString* out) {
    switch (n.kind) {
      case Node::Kind::kBody:
        for (const auto& c : n.children) DI_RETURN_IF_ERROR(render(*c, out));
        return Status::ok();
      case Node::Kind::kText:
        out->append(n.text);
        return Status::ok();
      case Node::Kind::kOutput: {
        DI_ASSIGN_OR_RETURN(Value v, eval(*n.expr));
        out->append(to_text(v));
        return Status::ok();
      }
      case Node::Kind::kIf:
        for (size_t i = 0; i < n.conditions.size(); ++i) {
          DI_ASSIGN_OR_RETURN(Value c, eval(*n.conditions[i]));
          if (truthy(c)) return render(*n.children[i], out);
        }
        if (n.children.size() > n.conditions.size()) return render(*n.children.back(), out);
        return Status::ok();
      case Node::Kind::kSet: {
        DI_ASSIGN_OR_RETURN(Value v, eval(*n.expr));
        if (n.targets.size() == 1) {
          scopes_.back()[n.targets[0]] = std::move(v);
          return Status::ok();
        }
        Value* ns = lookup(n.targets[0]);
        if (!ns || !ns->is_dict())
          return invalid_argument("chat template: 'set {}.{}' needs a namespace", n.targets[0], n.targets[1]);
        ns->as_dict()[n.targets[1]] = std::move(v);  // shared: visible in outer scopes too
        return Status::ok();
      }
      case Node::Kind::kFor:
        return render_for(n, out);
    }
    return Status::ok();
  }

 private:
  Status render_for(const Node& n, TaggedString* out) {
    DI_ASSIGN_OR_RETURN(Value seq, eval(*n.expr));
    List items;
    if (seq.is_list()) {
      items = seq.as_list();
    } else if (seq.is_dict()) {
      for (const auto& [k, v] : seq.as_dict()) items.push_back(Value::data_str(k));
    } else if (seq.is_str()) {
      return unsupported("chat template: iterating over a string is not supported");
    } else if (!seq.is_undefined() && !seq.is_none()) {
      return invalid_argument("chat template: 'for' over a value that is not a list");
    }
    if (n.filter) {
      List kept;
      for (auto& it : items) {
        scopes_.emplace_back();
        bind(n, it);
        auto c = eval(*n.filter);
        scopes_.pop_back();
        if (!c.is_ok()) return c.status();
        if (truthy(*c)) kept.push_back(it);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      if (n.children.size() > 1) return render(*n.children[1], out);
      return Status::ok();
    }
    const auto len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      scopes_.emplace_back();
      bind(n, items[i]);
      Dict loop{{"index", Value::integer(i + 1)}, {"index0", Value::integer(i)},
                {"first", Value::boolean(i == 0)}, {"last", Value::boolean(i + 1 == len)},
                {"length", Value::integer(len)}, {"revindex", Value::integer(len - i)},
                {"revindex0", Value::integer(len - i - 1)}};
      loop["previtem"] = i > 0 ? items[i - 1] : Value();
      loop["nextitem"] = i + 1 < len ? items[i + 1] : Value();
      scopes_.back()["loop"] = Value::dict(std::move(loop));
      Status st = render(*n.children[0], out);
      scopes_.pop_back();
      DI_RETURN_IF_ERROR(st);
    }
    return Status::ok();
  }

  void bind(const Node& n, const Value& item) {
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = item;
    } else if (item.is_list()) {
      for (size_t k = 0; k < n.targets.size(); ++k)
        scopes_.back()[n.targets[k]] = k < item.as_list().size() ? item.as_list()[k] : Value();
    }
  }

  Value* lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  Result<Value> eval(const Expr& e);
  Result<Value> call(const Expr& e);
  Result<Value> filter(const Expr& e, const Value& subject);
  Result<bool> test(const Expr& e, const Value& subject);

  std::vector<Dict> scopes_;
};

Result<Value> Renderer::eval(const Expr& e) {
  using K = Expr::Kind;
  switch (e.kind) {
    case K::kLiteral:
      return e.literal;
    case K::kName: {
      Value* v = lookup(e.name);
      return v ? *v : Value();
    }
    case K::kAttr:
    case K::kItem: {
      DI_ASSIGN_OR_RETURN(Value obj, eval(*e.kids[0]));
      Value key;
      if (e.kind == K::kAttr) {
        key = Value::data_str(e.name);
      } else {
        DI_ASSIGN_OR_RETURN(key, eval(*e.kids[1]));
      }
      if (obj.is_dict() && key.is_str()) {
        auto it = obj.as_dict().find(key.as_str().text);
        return it == obj.as_dict().end() ? Value() : it->second;
      }
      if ((obj.is_list() || obj.is_str()) && key.is_int()) {
        int64_t i = std::get<int64_t>(key.v);
        int64_t n = obj.is_list() ? obj.as_list().size() : obj.as_str().text.size();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value();
        if (obj.is_list()) return obj.as_list()[i];
        return Value::str(obj.as_str().substr(i, i + 1));
      }
      return Value();  // undefined, as Jinja's lenient lookup gives
    }
    case K::kSlice: {
      DI_ASSIGN_OR_RETURN(Value obj, eval(*e.kids[0]));
      DI_ASSIGN_OR_RETURN(Value a, eval(*e.kids[1]));
      DI_ASSIGN_OR_RETURN(Value b, eval(*e.kids[2]));
      int64_t n = obj.is_list() ? obj.as_list().size() : obj.is_str() ? obj.as_str().text.size() : -1;
      if (n < 0) return invalid_argument("chat template: slicing a value that is not a list or string");
      auto clamp = [n](const Value& v, int64_t dflt) {
        if (!v.is_int()) return dflt;
        int64_t i = std::get<int64_t>(v.v);
        if (i < 0) i += n;
        return std::clamp<int64_t>(i, 0, n);
      };
      int64_t s = clamp(a, 0), t = std::max(s, clamp(b, n));
      if (obj.is_str()) return Value::str(obj.as_str().substr(s, t));
      return Value::list(List(obj.as_list().begin() + s, obj.as_list().begin() + t));
    }
    case K::kCall:
      return call(e);
    case K::kFilter: {
      DI_ASSIGN_OR_RETURN(Value subject, eval(*e.kids[0]));
      return filter(e, subject);
    }
    case K::kTest: {
      DI_ASSIGN_OR_RETURN(Value subject, eval(*e.kids[0]));
      DI_ASSIGN_OR_RETURN(bool r, test(e, subject));
      return Value::boolean(r != e.negated);
    }
    case K::kNot: {
      DI_ASSIGN_OR_RETURN(Value v, eval(*e.kids[0]));
      return Value::boolean(!truthy(v));
    }
    case K::kNeg: {
      DI_ASSIGN_OR_RETURN(Value v, eval(*e.kids[0]));
      if (!v.is_int()) return invalid_argument("chat template: unary minus on a non-integer");
      return Value::integer(-std::get<int64_t>(v.v));
    }
    case K::kTernary: {
      DI_ASSIGN_OR_RETURN(Value c, eval(*e.kids[1]));
      return eval(truthy(c) ? *e.kids[0] : *e.kids[2]);
    }
    case K::kList: {
      List l;
      for (const auto& k : e.kids) {
        DI_ASSIGN_OR_RETURN(Value v, eval(*k));
        l.push_back(std::move(v));
      }
      return Value::list(std::move(l));
    }
    case K::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        DI_ASSIGN_OR_RETURN(Value k, eval(*e.kids[i]));
        DI_ASSIGN_OR_RETURN(Value v, eval(*e.kids[i + 1]));
        if (!k.is_str()) return unsupported("chat template: dict keys must be strings");
        d[k.as_str().text] = std::move(v);
      }
      return Value::dict(std::move(d));
    }
    case K::kBinary:
      break;
  }
  // Binary operators; and/or short-circuit and return an operand, as in Python.
  const std::string& op = e.name;
  DI_ASSIGN_OR_RETURN(Value l, eval(*e.kids[0]));
  if (op == "and") return truthy(l) ? eval(*e.kids[1]) : Result<Value>(l);
  if (op == "or") return truthy(l) ? Result<Value>(l) : eval(*e.kids[1]);
  DI_ASSIGN_OR_RETURN(Value r, eval(*e.kids[1]));
  if (op == "==") return Value::boolean(equal(l, r));
  if (op == "!=") return Value::boolean(!equal(l, r));
  if (op == "~") {
    TaggedString s = to_text(l);
    s.append(to_text(r));
    return Value::str(std::move(s));
  }
  if (op == "in" || op == "not in") {
    bool found = false;
    if (r.is_str() && l.is_str()) found = r.as_str().text.find(l.as_str().text) != std::string::npos;
    else if (r.is_list()) found = std::any_of(r.as_list().begin(), r.as_list().end(), [&](const Value& x) { return equal(x, l); });
    else if (r.is_dict() && l.is_str()) found = r.as_dict().count(l.as_str().text) > 0;
    else if (!r.is_undefined() && !r.is_none()) return invalid_argument("chat template: 'in' on an unsupported value");
    return Value::boolean(found == (op == "in"));
  }
  if (op == "+" && l.is_str() && r.is_str()) {
    TaggedString s = l.as_str();
    s.append(r.as_str());
    return Value::str(std::move(s));
  }
  if (op == "+" && l.is_list() && r.is_list()) {
    List c = l.as_list();
    c.insert(c.end(), r.as_list().begin(), r.as_list().end());
    return Value::list(std::move(c));
  }
  if (l.is_int() && r.is_int()) {
    int64_t a = std::get<int64_t>(l.v), b = std::get<int64_t>(r.v);
    if (op == "+") return Value::integer(a + b);
    if (op == "-") return Value::integer(a - b);
    if (op == "*") return Value::integer(a * b);
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
    if ((op == "//" || op == "%") && b == 0) return invalid_argument("chat template: division by zero");
    if (op == "//") return Value::integer(a / b);
    if (op == "%") return Value::integer(((a % b) + b) % b);
  }
  if (l.is_str() && r.is_str() && (op == "<" || op == ">"))
    return Value::boolean(op == "<" ? l.as_str().text < r.as_str().text : l.as_str().text > r.as_str().text);
  return unsupported("chat template: operator '{}' on these operand types is not supported", op);
}

}  // namespace

// Defined in jinja_builtins.cc.
Result<Value> call_builtin(const std::string& name, const std::vector<Value>& args,
                           const std::vector<std::string>& kwarg_names);
Result<Value> call_method(const Value& self, const std::string& name, const std::vector<Value>& args);
Result<Value> apply_filter(const std::string& name, const Value& subject, const std::vector<Value>& args);
Result<bool> apply_test(const std::string& name, const Value& subject, const std::vector<Value>& args);

namespace {

Result<Value> Renderer::call(const Expr& e) {
  std::vector<Value> args;
  for (size_t i = 1; i < e.kids.size(); ++i) {
    DI_ASSIGN_OR_RETURN(Value v, eval(*e.kids[i]));
    args.push_back(std::move(v));
  }
  const Expr& callee = *e.kids[0];
  if (callee.kind == Expr::Kind::kName) return call_builtin(callee.name, args, e.kwarg_names);
  if (callee.kind == Expr::Kind::kAttr) {
    DI_ASSIGN_OR_RETURN(Value self, eval(*callee.kids[0]));
    return call_method(self, callee.name, args);
  }
  return unsupported("chat template: this kind of call is not supported");
}

Result<Value> Renderer::filter(const Expr& e, const Value& subject) {
  std::vector<Value> args;
  for (size_t i = 1; i < e.kids.size(); ++i) {
    DI_ASSIGN_OR_RETURN(Value v, eval(*e.kids[i]));
    args.push_back(std::move(v));
  }
  return apply_filter(e.name, subject, args);
}

Result<bool> Renderer::test(const Expr& e, const Value& subject) {
  std::vector<Value> args;
  for (size_t i = 1; i < e.kids.size(); ++i) {
    DI_ASSIGN_OR_RETURN(Value v, eval(*e.kids[i]));
    args.push_back(std::move(v));
  }
  return apply_test(e.name, subject, args);
}

}  // namespace

Result<TaggedString> Template::render(const Dict& globals) const {
  if (!root_) return invalid_argument("chat template: rendering an empty template");
  Renderer r(globals);
  TaggedString out;
  DI_RETURN_IF_ERROR(r.render(*root_, &out));
  return out;
}

// Helpers shared with jinja_builtins.cc.
bool jinja_truthy(const Value& v) { return truthy(v); }
nlohmann::json jinja_to_json(const Value& v) { return to_json(v); }
TaggedString jinja_to_text(const Value& v) { return to_text(v); }
TaggedString jinja_strip(const TaggedString& s, bool left, bool right) { return strip(s, left, right); }

}  // namespace deepinfer::recipe::jinja
