// Values of the chat-template interpreter. Strings remember which of their bytes came from
// template text (trusted: may spell control tokens) and which from request data (never).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace deepinfer::recipe::jinja {

struct TaggedString {
  std::string text;
  std::vector<std::pair<size_t, size_t>> trusted;  // sorted, disjoint [begin, end) byte ranges

  static TaggedString literal(std::string s) {
    TaggedString t;
    t.text = std::move(s);
    if (!t.text.empty()) t.trusted.push_back({0, t.text.size()});
    return t;
  }
  static TaggedString data(std::string s) { return TaggedString{std::move(s), {}}; }
  void append(const TaggedString& o) {
    size_t base = text.size();
    text += o.text;
    for (auto [b, e] : o.trusted) {
      if (!trusted.empty() && trusted.back().second == base + b) {
        trusted.back().second = base + e;  // keep ranges merged
      } else {
        trusted.push_back({base + b, base + e});
      }
    }
  }
  // Keeps bytes [b, e) with their tags.
  TaggedString substr(size_t b, size_t e) const {
    TaggedString t;
    t.text = text.substr(b, e - b);
    for (auto [tb, te] : trusted) {
      size_t nb = std::max(tb, b), ne = std::min(te, e);
      if (nb < ne) t.trusted.push_back({nb - b, ne - b});
    }
    return t;
  }
};

struct Value;
using List = std::vector<Value>;
using Dict = std::map<std::string, Value, std::less<>>;

struct Undefined {};
struct None {};

struct Value {
  std::variant<Undefined, None, bool, int64_t, TaggedString, std::shared_ptr<List>,
               std::shared_ptr<Dict>>
      v;

  Value() = default;
  static Value none() { Value x; x.v = None{}; return x; }
  static Value boolean(bool b) { Value x; x.v = b; return x; }
  static Value integer(int64_t i) { Value x; x.v = i; return x; }
  static Value str(TaggedString s) { Value x; x.v = std::move(s); return x; }
  static Value data_str(std::string s) { return str(TaggedString::data(std::move(s))); }
  static Value list(List l = {}) { Value x; x.v = std::make_shared<List>(std::move(l)); return x; }
  static Value dict(Dict d = {}) { Value x; x.v = std::make_shared<Dict>(std::move(d)); return x; }

  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }
  bool is_str() const { return std::holds_alternative<TaggedString>(v); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(v); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(v); }
  const TaggedString& as_str() const { return std::get<TaggedString>(v); }
  const List& as_list() const { return *std::get<std::shared_ptr<List>>(v); }
  List& as_list() { return *std::get<std::shared_ptr<List>>(v); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(v); }
  Dict& as_dict() { return *std::get<std::shared_ptr<Dict>>(v); }
};

}  // namespace deepinfer::recipe::jinja
