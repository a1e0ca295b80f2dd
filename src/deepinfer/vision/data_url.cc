#include "deepinfer/vision/data_url.h"

#include <array>
#include <cstdint>

namespace deepinfer::vision {

Result<std::string> bytes_from_base64(const std::string& data, const std::string& path) {
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> v{};
    v.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) v[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
    return v;
  }();
  size_t n = data.size();
  while (n > 0 && data[n - 1] == '=') --n;
  if (data.size() - n > 2 || n % 4 == 1)
    return invalid_argument("'{}' is not valid base64 (bad length or padding)", path);
  std::string out;
  out.reserve(n * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const int8_t v = kValue[static_cast<uint8_t>(data[i])];
    if (v < 0)
      return invalid_argument("'{}' is not valid base64 (character {} at offset {})", path,
                              static_cast<int>(static_cast<uint8_t>(data[i])), i);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

Result<std::string> bytes_from_data_url(const std::string& url, const std::string& path) {
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0)
    return invalid_argument("'{}': remote image URLs are not fetched by this server; send the image inline as a "
                            "data: URL (data:image/png;base64,...)", path);
  if (url.rfind("data:", 0) != 0) return invalid_argument("'{}' must be a data: URL (data:image/<type>;base64,...)", path);
  const size_t comma = url.find(',');
  if (comma == std::string::npos) return invalid_argument("'{}': the data: URL has no ',' before its data", path);
  const std::string meta = url.substr(5, comma - 5);
  if (meta.size() < 7 || meta.compare(meta.size() - 7, 7, ";base64") != 0)
    return invalid_argument("'{}': only base64 data: URLs are accepted (data:image/<type>;base64,...)", path);
  return bytes_from_base64(url.substr(comma + 1), path);
}

}  // namespace deepinfer::vision
