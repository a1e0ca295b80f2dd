// Helpers for kvstore tests: temp target directories under /tmp and deterministic block bytes.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "deepinfer/kvstore/key.h"

namespace deepinfer::kvstore::testing {

// mkdtemp'd directory under /tmp (or $DEEPINFER_KVSTORE_TEST_DIR, e.g. a tmpfs to exercise
// the buffered fallback), removed recursively on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("DEEPINFER_KVSTORE_TEST_DIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/di_kvstore_test_XXXXXX";
    if (char* p = ::mkdtemp(tmpl.data())) path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> targets(int n) const {
    std::vector<std::string> t;
    for (int i = 0; i < n; ++i) t.push_back(path_ + "/t" + std::to_string(i));
    return t;
  }

 private:
  std::string path_;
};

inline BlockKey test_key(uint64_t i, uint64_t salt = 0) {
  BlockKey parent{};
  std::memcpy(parent.data(), &salt, 8);
  int32_t toks[2] = {static_cast<int32_t>(i), static_cast<int32_t>(i >> 32)};
  return chain_key(parent, toks);
}

// Block content derived from the key alone, so any process can check what it reads.
inline void fill_block(const BlockKey& key, uint8_t* dst, size_t n) {
  uint64_t s = key_prefix64(key) | 1;
  for (size_t i = 0; i < n; i += 8) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    size_t c = std::min<size_t>(8, n - i);
    std::memcpy(dst + i, &s, c);
  }
}

inline std::vector<uint8_t> make_block(const BlockKey& key, size_t n) {
  std::vector<uint8_t> v(n);
  fill_block(key, v.data(), n);
  return v;
}

}  // namespace deepinfer::kvstore::testing
