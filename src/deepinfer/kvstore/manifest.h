// The store manifest (issue #30): every target holds <target>/kv1/store.manifest naming the
// store id, the target count, the coding parameters and that target's position. Engines, verify
// and gc check a target list against it, so a subset, a reordering, a target of another store
// or a directory listed twice is refused before anything is read, written or deleted.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::kvstore {

struct StoreManifest {
  std::string store_id;  // 32 hex digits, random at creation
  int num_targets = 0;
  int position = 0;      // this target's index in the list
  int data_shards = 0;
  int parity_shards = 0;
};

enum class TargetState {
  kOk,          // holds a manifest that matches the list
  kNoManifest,  // a directory without one (new store, a replaced disk, a pre-manifest store)
  kMissing,     // not a directory we can read (gone, unmounted, a plain file)
};

struct ManifestCheck {
  std::optional<StoreManifest> store;  // agreed by every manifest found (position = -1)
  std::vector<TargetState> state;      // [targets.size()]
  std::vector<std::string> why;        // [targets.size()] reason for kMissing
  int missing() const;
  int without_manifest() const;
};

std::string manifest_path(const std::string& target);

// Refuses the same directory listed twice ("d0" and "d0/", a symlink to it).
Status check_distinct_targets(const std::vector<std::string>& targets);

// Reads every target's manifest; refuses (kInvalidArgument, naming the target) manifests that
// disagree with each other or with the list (count, position); corrupt manifests are errors.
Result<ManifestCheck> check_manifests(const std::vector<std::string>& targets);

// Publishes `m` as the target's manifest unless one exists (link(2): first writer wins).
// Creates <target>/kv1 if needed.
Status write_manifest(const std::string& target, const StoreManifest& m);

std::string new_store_id();

}  // namespace deepinfer::kvstore
