// Content identity of a model's weights for the KV store namespace (issue #30): a digest of
// the bytes, not of the name, path, size or mtime, so a different model at the same path with
// the same size and a reset mtime can never read the first one's KV.
#pragma once

#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::kvstore {

struct ContentDigestOptions {
  // Remembers digests per file identity (path, device, inode, size, mtime_ns, ctime_ns) so
  // the next start does not re-read the weights. Empty = no cache.
  std::string cache_file;
};

// XXH3-128 of the file's bytes, as 32 hex digits. For a directory (Hugging Face layout): a
// digest over the names and digests of its top-level regular files (hidden ones skipped), so
// replacing any weight or config file inside it changes the result.
Result<std::string> content_digest(const std::string& path, const ContentDigestOptions& options = {});

}  // namespace deepinfer::kvstore
