// SHA-256 chain keys (OpenSSL EVP) and their hex form.
#include "deepinfer/kvstore/key.h"

#include <cstring>
#include <string_view>
#include <vector>

#include <openssl/evp.h>

#include "deepinfer/base/check.h"

namespace deepinfer::kvstore {
namespace {

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    DI_CHECK(ctx_ && EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1, "SHA-256 init failed");
  }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  void update(const void* p, size_t n) { DI_CHECK(EVP_DigestUpdate(ctx_, p, n) == 1, "SHA-256"); }
  void update_u32(uint32_t v) {
    uint8_t b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
    update(b, 4);
  }
  // Length-prefixed so that ("ab","c") and ("a","bc") differ.
  void update_str(const std::string& s) {
    update_u32(static_cast<uint32_t>(s.size()));
    update(s.data(), s.size());
  }
  BlockKey finish() {
    BlockKey out{};
    unsigned int len = 0;
    DI_CHECK(EVP_DigestFinal_ex(ctx_, out.data(), &len) == 1 && len == 32, "SHA-256 final");
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace

BlockKey root_key(const Namespace& ns) {
  Sha256 h;
  static const char kDomain[] = "deepinfer.kvstore.ns.v1";
  h.update(kDomain, sizeof(kDomain) - 1);
  h.update_str(ns.model_id);
  h.update_str(ns.revision);
  h.update_u32(ns.kv_layout_version);
  h.update_str(ns.dtype);
  h.update_u32(ns.block_tokens);
  h.update_u32(ns.shard_index);
  h.update_u32(ns.shard_count);
  return h.finish();
}

BlockKey chain_key(const BlockKey& parent, std::span<const int32_t> tokens,
                   std::span<const uint64_t> extra) {
  Sha256 h;
  h.update(parent.data(), parent.size());
  h.update_u32(static_cast<uint32_t>(tokens.size()));
  for (int32_t t : tokens) h.update_u32(static_cast<uint32_t>(t));
  if (!extra.empty()) {
    static const char kDomain[] = "deepinfer.kvstore.extra.v1";
    h.update(kDomain, sizeof(kDomain) - 1);
    h.update_u32(static_cast<uint32_t>(extra.size()));
    for (uint64_t w : extra) {
      h.update_u32(static_cast<uint32_t>(w));
      h.update_u32(static_cast<uint32_t>(w >> 32));
    }
  }
  return h.finish();
}

std::vector<BlockKey> prefix_keys(const Namespace& ns, std::span<const int32_t> tokens) {
  std::vector<BlockKey> keys;
  if (ns.block_tokens == 0) return keys;
  BlockKey parent = root_key(ns);
  for (size_t i = 0; i + ns.block_tokens <= tokens.size(); i += ns.block_tokens) {
    parent = chain_key(parent, tokens.subspan(i, ns.block_tokens));
    keys.push_back(parent);
  }
  return keys;
}

std::string to_hex(const BlockKey& key) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < 32; ++i) {
    s[2 * i] = kDigits[key[i] >> 4];
    s[2 * i + 1] = kDigits[key[i] & 15];
  }
  return s;
}

bool from_hex(std::string_view hex, BlockKey* out) {
  if (hex.size() != 64) return false;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < 32; ++i) {
    int hi = nib(hex[2 * i]), lo = nib(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

uint64_t key_prefix64(const BlockKey& key) {
  uint64_t v;
  std::memcpy(&v, key.data(), 8);
  return v;
}

}  // namespace deepinfer::kvstore
