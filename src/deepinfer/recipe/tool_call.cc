// Python-compatible JSON text and tool-call ids (see tool_call.h).
#include "deepinfer/recipe/tool_call.h"

#include <atomic>
#include <cstdint>
#include <random>

#include <fmt/format.h>

namespace deepinfer::recipe {
namespace {

// Decodes one UTF-8 sequence at s[i] (already valid: nlohmann validated it on parse).
uint32_t next_code_point(const std::string& s, size_t* i) {
  const auto c = static_cast<uint8_t>(s[*i]);
  int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len && *i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[*i + k]) & 0x3F);
  *i += len;
  return cp;
}

void dump_string(const std::string& s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    switch (c) {
      case '"': *out += "\\\""; ++i; continue;
      case '\\': *out += "\\\\"; ++i; continue;
      case '\n': *out += "\\n"; ++i; continue;
      case '\r': *out += "\\r"; ++i; continue;
      case '\t': *out += "\\t"; ++i; continue;
      case '\b': *out += "\\b"; ++i; continue;
      case '\f': *out += "\\f"; ++i; continue;
      default: break;
    }
    if (c < 0x20) {
      *out += fmt::format("\\u{:04x}", c);
      ++i;
    } else if (c < 0x80 || !ensure_ascii) {
      out->push_back(static_cast<char>(c));
      ++i;
    } else {
      uint32_t cp = next_code_point(s, &i);
      if (cp >= 0x10000) {  // surrogate pair, as Python writes it
        cp -= 0x10000;
        *out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        *out += fmt::format("\\u{:04x}", cp);
      }
    }
  }
  out->push_back('"');
}

void dump(const nlohmann::ordered_json& v, bool ensure_ascii, std::string* out) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        if (!first) *out += ", ";
        first = false;
        dump_string(k, ensure_ascii, out);
        *out += ": ";
        dump(x, ensure_ascii, out);
      }
      out->push_back('}');
      break;
    }
    case nlohmann::ordered_json::value_t::array: {
      out->push_back('[');
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) *out += ", ";
        dump(v[i], ensure_ascii, out);
      }
      out->push_back(']');
      break;
    }
    case nlohmann::ordered_json::value_t::string:
      dump_string(v.get_ref<const std::string&>(), ensure_ascii, out);
      break;
    case nlohmann::ordered_json::value_t::boolean:
      *out += v.get<bool>() ? "true" : "false";
      break;
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      *out += "null";
      break;
    default:  // numbers: nlohmann's shortest round-trip form matches Python's repr for
              // integers and nearly all floats
      *out += v.dump();
      break;
  }
}

}  // namespace

std::string python_json_dumps(const nlohmann::ordered_json& value, bool ensure_ascii) {
  std::string out;
  dump(value, ensure_ascii, &out);
  return out;
}

std::string make_tool_call_id() {
  static const uint64_t seed = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  static std::atomic<uint64_t> counter{0};
  uint64_t x = seed ^ (counter.fetch_add(1) * 0xBF58476D1CE4E5B9ull);
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) {
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    id.push_back(kAlphabet[x % 62]);
  }
  return id;
}

}  // namespace deepinfer::recipe
