// Test messages whose bytes say who they are: a header (transfer id, index, size) and a body
// drawn from a generator seeded by it, so a swapped, cut or corrupted message is caught.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace deepinfer::transfer::testing {

constexpr size_t kHeaderBytes = 24;

inline void fill_body(uint64_t seed, uint8_t* p, size_t n) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull | 1;
  for (size_t i = 0; i < n; i += 8) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    std::memcpy(p + i, &s, n - i < 8 ? n - i : 8);
  }
}

inline std::vector<uint8_t> make_message(uint64_t transfer_id, uint64_t index, size_t size) {
  std::vector<uint8_t> m(size < kHeaderBytes ? kHeaderBytes : size);
  const uint64_t header[3] = {transfer_id, index, m.size()};
  std::memcpy(m.data(), header, sizeof header);
  fill_body(transfer_id * 1000003 + index, m.data() + kHeaderBytes, m.size() - kHeaderBytes);
  return m;
}

// Empty when `m` is message `index` of `transfer_id` with `size` bytes, byte for byte.
inline std::string check_message(uint64_t transfer_id, uint64_t index, size_t size,
                                 const std::vector<uint8_t>& m) {
  if (m.size() != size)
    return fmt::format("transfer {} message {}: {} bytes, expected {}", transfer_id, index,
                       m.size(), size);
  uint64_t header[3];
  std::memcpy(header, m.data(), sizeof header);
  if (header[0] != transfer_id || header[1] != index)
    return fmt::format("transfer {}: got message {} of transfer {} where message {} was due",
                       transfer_id, header[1], header[0], index);
  const std::vector<uint8_t> want = make_message(transfer_id, index, size);
  if (m != want) {
    size_t at = 0;
    while (m[at] == want[at]) ++at;
    return fmt::format("transfer {} message {}: byte {} differs", transfer_id, index, at);
  }
  return {};
}

}  // namespace deepinfer::transfer::testing
