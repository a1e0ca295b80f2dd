// Where shards live: <target>/kv1/<first two hex digits>/<64-hex key>.<shard index>; shard i of
// a key sits on target (key_prefix64(key) + i) % num_targets, so the k+m shards of one entry are
// on k+m different targets. A file's mtime is the entry's expiry time (refreshed on hits).
#pragma once

#include <string>
#include <string_view>

#include "deepinfer/kvstore/key.h"

namespace deepinfer::kvstore {

inline constexpr const char* kLayoutDir = "kv1";

inline int placement(const BlockKey& key, int shard, int num_targets) {
  return static_cast<int>((key_prefix64(key) % static_cast<uint64_t>(num_targets) +
                           static_cast<uint64_t>(shard)) % static_cast<uint64_t>(num_targets));
}

std::string subdir_path(const std::string& target, const BlockKey& key);
std::string shard_path(const std::string& target, const BlockKey& key, int shard);
// A unique temporary name in the same directory (rename into place publishes it).
std::string temp_shard_path(const std::string& target, const BlockKey& key, int shard);

// "<hex>.<i>" -> key, shard. False for anything else (temps, locks, strays).
bool parse_shard_name(std::string_view name, BlockKey* key, int* shard);
// ".tmp.<hex>.<i>.<host>.<pid>.<rand>": true, with the writer's host and pid.
bool parse_temp_name(std::string_view name, std::string* host, long* pid);

// This machine's host name, reduced to [A-Za-z0-9-] (it is embedded in temp names).
const std::string& host_tag();

}  // namespace deepinfer::kvstore
