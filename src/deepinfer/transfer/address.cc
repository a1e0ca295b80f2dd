#include "deepinfer/transfer/address.h"

namespace deepinfer::transfer {
namespace {

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string hex_encode(const void* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out(2 * size, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 0xf];
  }
  return out;
}

Result<std::vector<uint8_t>> hex_decode(const std::string& text) {
  if (text.empty() || text.size() % 2 != 0)
    return invalid_argument("hex address: length {} is not a positive even number", text.size());
  std::vector<uint8_t> out(text.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return invalid_argument("hex address: character {} is not a hex digit",
                              2 * i + (hi < 0 ? 0 : 1));
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

std::string peer_label(const std::string& hex_address) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : hex_address) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return fmt::format("peer {:08x}", static_cast<uint32_t>(h ^ (h >> 32)));
}

}  // namespace deepinfer::transfer
