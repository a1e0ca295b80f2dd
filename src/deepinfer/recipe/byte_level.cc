// GPT-2 byte-level alphabet and UTF-8 scanning (see byte_level.h).
#include "deepinfer/recipe/byte_level.h"

#include <array>

namespace deepinfer::recipe {
namespace {

// GPT-2 keeps printable Latin-1 bytes as themselves and moves the rest (controls, space,
// 0x7F-0xA0, 0xAD) to U+0100 upwards, in byte order, so every byte has a visible character.
struct ByteMaps {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int16_t, 512> cp_to_byte{};  // all mapped code points are < 0x144
  ByteMaps() {
    cp_to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      byte_to_cp[b] = keep ? static_cast<uint32_t>(b) : next++;
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMaps& maps() {
  static const ByteMaps m;
  return m;
}

enum class Scan { kComplete, kInvalid, kIncomplete };

// Scans one character at s[i]; *len is the bytes it covers (for kInvalid: the maximal
// invalid subpart, at least 1; for kIncomplete: the whole remaining tail).
Scan scan(std::string_view s, size_t i, int* len, uint32_t* cp) {
  auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    *len = 1;
    if (cp) *cp = b0;
    return Scan::kComplete;
  }
  int need;
  uint8_t lo = 0x80, hi = 0xBF;
  uint32_t v;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1; v = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2; v = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3; v = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *len = 1;
    return Scan::kInvalid;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= s.size()) {
      *len = k;
      return Scan::kIncomplete;
    }
    auto b = static_cast<uint8_t>(s[i + k]);
    if (b < lo || b > hi) {
      *len = k;
      return Scan::kInvalid;
    }
    lo = 0x80;
    hi = 0xBF;
    v = (v << 6) | (b & 0x3F);
  }
  *len = need + 1;
  if (cp) *cp = v;
  return Scan::kComplete;
}

}  // namespace

void utf8_append(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int utf8_sequence_length(std::string_view s, size_t i, uint32_t* cp) {
  int len = 0;
  return scan(s, i, &len, cp) == Scan::kComplete ? len : 0;
}

int utf8_incomplete_prefix_length(std::string_view s, size_t i) {
  int len = 0;
  return scan(s, i, &len, nullptr) == Scan::kIncomplete ? len : 0;
}

std::string utf8_make_valid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int len = 0;
    Scan r = scan(s, i, &len, nullptr);
    if (r == Scan::kComplete) {
      out.append(s.data() + i, len);
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += len;
  }
  return out;
}

bool byte_level_decode(std::string_view text, std::string* out) {
  const ByteMaps& m = maps();
  bool ok = true;
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    int len = utf8_sequence_length(text, i, &cp);
    if (len == 0) {  // not UTF-8 at all: keep the byte
      out->push_back(text[i]);
      ok = false;
      ++i;
      continue;
    }
    if (cp < m.cp_to_byte.size() && m.cp_to_byte[cp] >= 0) {
      out->push_back(static_cast<char>(m.cp_to_byte[cp]));
    } else {
      out->append(text.data() + i, len);
      ok = false;
    }
    i += len;
  }
  return ok;
}

std::string byte_level_encode(std::string_view bytes) {
  const ByteMaps& m = maps();
  std::string out;
  for (char c : bytes) utf8_append(m.byte_to_cp[static_cast<uint8_t>(c)], &out);
  return out;
}

}  // namespace deepinfer::recipe
