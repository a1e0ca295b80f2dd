// UCX worker addresses as text: they travel hex-encoded in control messages, and show up in
// error messages as a short label.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::transfer {

std::string hex_encode(const void* data, size_t size);
// Lower or upper case; an odd length or a non-hex character is an invalid argument.
Result<std::vector<uint8_t>> hex_decode(const std::string& text);
// "peer 1a2b3c4d": a hash of the hex address, the same in every process (both ends can log it).
std::string peer_label(const std::string& hex_address);

}  // namespace deepinfer::transfer
