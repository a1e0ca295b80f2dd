// Inline images as the APIs carry them: "data:<media type>;base64,<data>" URLs and bare base64,
// to bytes. Remote http(s) URLs are refused (nothing is fetched). Errors are invalid-argument
// statuses whose message names `path` (the request field, e.g. "messages[0].content[1].image_url").
#pragma once

#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::vision {

// Standard base64 (padding optional, no whitespace inside) -> bytes.
Result<std::string> bytes_from_base64(const std::string& data, const std::string& path);
// The bytes of a base64 data: URL.
Result<std::string> bytes_from_data_url(const std::string& url, const std::string& path);

}  // namespace deepinfer::vision
