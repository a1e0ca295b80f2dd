// Built-in functions, methods, filters and tests of the chat-template interpreter.
#include <nlohmann/json.hpp>

#include "deepinfer/recipe/jinja.h"

namespace deepinfer::recipe::jinja {

bool jinja_truthy(const Value& v);
nlohmann::json jinja_to_json(const Value& v);
TaggedString jinja_to_text(const Value& v);
TaggedString jinja_strip(const TaggedString& s, bool left, bool right);

namespace {

Value from_json(const nlohmann::json& j) {
  if (j.is_boolean()) return Value::boolean(j.get<bool>());
  if (j.is_number_integer()) return Value::integer(j.get<int64_t>());
  if (j.is_string()) return Value::data_str(j.get<std::string>());
  if (j.is_array()) {
    List l;
    for (const auto& x : j) l.push_back(from_json(x));
    return Value::list(std::move(l));
  }
  if (j.is_object()) {
    Dict d;
    for (const auto& [k, x] : j.items()) d[k] = from_json(x);
    return Value::dict(std::move(d));
  }
  if (j.is_number_float()) return Value::data_str(j.dump());
  return Value::none();
}

std::string lower(std::string s) {
  for (char& c : s) if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}
std::string upper(std::string s) {
  for (char& c : s) if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

// Case changes keep the tags only where the bytes are unchanged in length (ASCII-only maps).
TaggedString map_case(const TaggedString& s, bool up) {
  TaggedString t = s;
  t.text = up ? upper(s.text) : lower(s.text);
  return t;
}

TaggedString replace_all(const TaggedString& s, const std::string& from, const TaggedString& to) {
  if (from.empty()) return s;
  TaggedString out;
  size_t pos = 0;
  while (true) {
    size_t f = s.text.find(from, pos);
    if (f == std::string::npos) break;
    out.append(s.substr(pos, f));
    out.append(to);
    pos = f + from.size();
  }
  out.append(s.substr(pos, s.text.size()));
  return out;
}

// json.dumps(x, ensure_ascii=False, indent=indent) as HF's tojson filter produces it.
void python_json(const Value& v, int indent, int level, std::string* out) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * lvl), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  if (v.is_list() && !v.as_list().empty()) {
    out->push_back('[');
    bool first = true;
    for (const auto& x : v.as_list()) {
      if (!first) out->append(item_sep);
      first = false;
      newline(level + 1);
      python_json(x, indent, level + 1, out);
    }
    newline(level);
    out->push_back(']');
  } else if (v.is_dict() && !v.as_dict().empty()) {
    out->push_back('{');
    bool first = true;
    for (const auto& [k, x] : v.as_dict()) {
      if (!first) out->append(item_sep);
      first = false;
      newline(level + 1);
      out->append(nlohmann::json(k).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      out->append(": ");
      python_json(x, indent, level + 1, out);
    }
    newline(level);
    out->push_back('}');
  } else {
    out->append(jinja_to_json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

}  // namespace

Result<Value> call_builtin(const std::string& name, const std::vector<Value>& args,
                           const std::vector<std::string>& kwarg_names) {
  const size_t positional = args.size() - kwarg_names.size();
  if (name == "raise_exception") {
    std::string msg = args.empty() ? "" : jinja_to_text(args[0]).text;
    return invalid_argument("chat template raised an error: {}", msg);
  }
  if (name == "namespace") {
    Dict d;
    for (size_t i = 0; i < kwarg_names.size(); ++i) d[kwarg_names[i]] = args[positional + i];
    return Value::dict(std::move(d));
  }
  if (name == "range") {
    if (args.empty() || args.size() > 2 || !args[0].is_int() || (args.size() == 2 && !args[1].is_int()))
      return invalid_argument("chat template: range() takes one or two integers");
    int64_t a = args.size() == 2 ? std::get<int64_t>(args[0].v) : 0;
    int64_t b = std::get<int64_t>(args.back().v);
    if (b - a > 1000000) return invalid_argument("chat template: range() too long");
    List l;
    for (int64_t i = a; i < b; ++i) l.push_back(Value::integer(i));
    return Value::list(std::move(l));
  }
  return unsupported("chat template: function '{}' is not supported", name);
}

Result<Value> call_method(const Value& self, const std::string& name, const std::vector<Value>& args) {
  auto str_arg = [&](size_t i) -> std::string {
    return i < args.size() && args[i].is_str() ? args[i].as_str().text : std::string();
  };
  if (self.is_str()) {
    const TaggedString& s = self.as_str();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      if (!args.empty()) return unsupported("chat template: {}() with arguments is not supported", name);
      return Value::str(jinja_strip(s, name != "rstrip", name != "lstrip"));
    }
    if (name == "startswith") return Value::boolean(s.text.rfind(str_arg(0), 0) == 0);
    if (name == "endswith") {
      std::string suf = str_arg(0);
      return Value::boolean(s.text.size() >= suf.size() && s.text.compare(s.text.size() - suf.size(), suf.size(), suf) == 0);
    }
    if (name == "upper" || name == "lower") return Value::str(map_case(s, name == "upper"));
    if (name == "replace" && args.size() == 2 && args[1].is_str())
      return Value::str(replace_all(s, str_arg(0), args[1].as_str()));
    if (name == "split") {
      std::string sep = str_arg(0);
      if (sep.empty()) return unsupported("chat template: split() without a separator is not supported");
      List parts;
      size_t pos = 0;
      while (true) {
        size_t f = s.text.find(sep, pos);
        parts.push_back(Value::str(s.substr(pos, f == std::string::npos ? s.text.size() : f)));
        if (f == std::string::npos) break;
        pos = f + sep.size();
      }
      return Value::list(std::move(parts));
    }
  }
  if (self.is_dict()) {
    const Dict& d = self.as_dict();
    if (name == "get") {
      auto it = d.find(str_arg(0));
      if (it != d.end()) return it->second;
      return args.size() > 1 ? args[1] : Value::none();
    }
    if (name == "items" || name == "keys" || name == "values") {
      List l;
      for (const auto& [k, v] : d) {
        if (name == "items") l.push_back(Value::list({Value::data_str(k), v}));
        else if (name == "keys") l.push_back(Value::data_str(k));
        else l.push_back(v);
      }
      return Value::list(std::move(l));
    }
  }
  return unsupported("chat template: method '{}' is not supported on this value", name);
}

Result<Value> apply_filter(const std::string& name, const Value& v, const std::vector<Value>& args) {
  if (name == "trim") {
    if (!v.is_str()) return Value::str(jinja_to_text(v));
    return Value::str(jinja_strip(v.as_str(), true, true));
  }
  if (name == "length" || name == "count") {
    if (v.is_str()) return Value::integer(static_cast<int64_t>(v.as_str().text.size()));
    if (v.is_list()) return Value::integer(static_cast<int64_t>(v.as_list().size()));
    if (v.is_dict()) return Value::integer(static_cast<int64_t>(v.as_dict().size()));
    return invalid_argument("chat template: length of a value that has none");
  }
  if (name == "upper" || name == "lower") return Value::str(map_case(jinja_to_text(v), name == "upper"));
  if (name == "string") return Value::str(jinja_to_text(v));
  if (name == "default" || name == "d") {
    bool use_default = v.is_undefined() || (args.size() > 1 && jinja_truthy(args[1]) && !jinja_truthy(v));
    if (use_default) return args.empty() ? Value::data_str("") : args[0];
    return v;
  }
  if (name == "first" || name == "last") {
    if (v.is_list()) {
      if (v.as_list().empty()) return Value();
      return name == "first" ? v.as_list().front() : v.as_list().back();
    }
    return invalid_argument("chat template: '{}' filter needs a list", name);
  }
  if (name == "join") {
    if (!v.is_list()) return invalid_argument("chat template: 'join' filter needs a list");
    TaggedString sep = args.empty() ? TaggedString{} : jinja_to_text(args[0]);
    TaggedString out;
    for (size_t i = 0; i < v.as_list().size(); ++i) {
      if (i) out.append(sep);
      out.append(jinja_to_text(v.as_list()[i]));
    }
    return Value::str(std::move(out));
  }
  if (name == "tojson") {
    // Data from the request: never trusted, whatever it spells.
    int indent = args.empty() || !args[0].is_int() ? -1 : static_cast<int>(std::get<int64_t>(args[0].v));
    std::string out;
    python_json(v, indent, 0, &out);
    return Value::data_str(std::move(out));
  }
  if (name == "replace" && args.size() == 2 && args[0].is_str() && args[1].is_str())
    return Value::str(replace_all(jinja_to_text(v), args[0].as_str().text, args[1].as_str()));
  if (name == "list") {
    if (v.is_list()) return v;
    return invalid_argument("chat template: 'list' filter on an unsupported value");
  }
  return unsupported("chat template: filter '{}' is not supported", name);
}

Result<bool> apply_test(const std::string& name, const Value& v, const std::vector<Value>& args) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_str();
  if (name == "number" || name == "integer") return v.is_int();
  if (name == "boolean") return v.is_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "sequence" || name == "iterable") return v.is_list() || v.is_str() || v.is_dict();
  if (name == "true") return v.is_bool() && std::get<bool>(v.v);
  if (name == "false") return v.is_bool() && !std::get<bool>(v.v);
  if (name == "equalto" || name == "eq") {
    if (args.empty()) return invalid_argument("chat template: '{}' test needs an argument", name);
    return jinja_to_json(v) == jinja_to_json(args[0]);
  }
  return unsupported("chat template: test '{}' is not supported", name);
}

// Converts request JSON (e.g. tool definitions) into template values; all strings untrusted.
Value value_from_json(const nlohmann::json& j) { return from_json(j); }

}  // namespace deepinfer::recipe::jinja
