// Store manifests: a small key=value file per target, published with link(2) so two processes
// creating a store at the same moment cannot both win.
#include "deepinfer/kvstore/manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "deepinfer/kvstore/layout.h"

namespace deepinfer::kvstore {
namespace {

constexpr const char* kMagic = "deepinfer-kvstore-manifest 1";

Result<StoreManifest> parse_manifest(const std::string& path, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kMagic) return corrupt("{}: not a store manifest", path);
  std::map<std::string, std::string> kv;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  StoreManifest m;
  auto num = [&](const char* key, int* out) {
    auto it = kv.find(key);
    if (it == kv.end() || it->second.empty()) return false;
    char* end = nullptr;
    long v = std::strtol(it->second.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > 65535) return false;
    *out = static_cast<int>(v);
    return true;
  };
  m.store_id = kv["store_id"];
  if (m.store_id.size() != 32 || !num("targets", &m.num_targets) || !num("position", &m.position) ||
      !num("data_shards", &m.data_shards) || !num("parity_shards", &m.parity_shards) ||
      m.position >= m.num_targets) {
    return corrupt("{}: damaged store manifest (restore it from another target's, changing "
                   "position=)", path);
  }
  return m;
}

std::string normalized(const std::string& path) {
  if (char* real = ::realpath(path.c_str(), nullptr)) {
    std::string out(real);
    std::free(real);
    return out;
  }
  std::string out = path;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

int ManifestCheck::missing() const {
  return static_cast<int>(std::count(state.begin(), state.end(), TargetState::kMissing));
}

int ManifestCheck::without_manifest() const {
  return static_cast<int>(std::count(state.begin(), state.end(), TargetState::kNoManifest));
}

std::string manifest_path(const std::string& target) {
  return fmt::format("{}/{}/store.manifest", target, kLayoutDir);
}

std::string new_store_id() {
  std::random_device rd;
  std::mt19937_64 rng((uint64_t(rd()) << 32) ^ rd() ^ (uint64_t(::getpid()) << 16));
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

Status check_distinct_targets(const std::vector<std::string>& targets) {
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < targets.size(); ++i) {
    auto [it, fresh] = seen.emplace(normalized(targets[i]), i);
    if (!fresh) {
      return invalid_argument("kvstore: targets {} ({}) and {} ({}) are the same directory",
                              it->second, targets[it->second], i, targets[i]);
    }
  }
  return Status::ok();
}

Result<ManifestCheck> check_manifests(const std::vector<std::string>& targets) {
  DI_RETURN_IF_ERROR(check_distinct_targets(targets));
  ManifestCheck c;
  c.state.assign(targets.size(), TargetState::kNoManifest);
  c.why.assign(targets.size(), "");
  int first = -1;
  for (size_t i = 0; i < targets.size(); ++i) {
    struct stat st;
    if (::stat(targets[i].c_str(), &st) != 0) {
      c.state[i] = TargetState::kMissing;
      c.why[i] = std::strerror(errno);
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      c.state[i] = TargetState::kMissing;
      c.why[i] = "not a directory";
      continue;
    }
    const std::string path = manifest_path(targets[i]);
    std::ifstream in(path);
    if (!in) {
      if (errno != ENOENT) {
        c.state[i] = TargetState::kMissing;
        c.why[i] = fmt::format("cannot read {}: {}", path, std::strerror(errno));
      }
      continue;
    }
    std::stringstream text;
    text << in.rdbuf();
    DI_ASSIGN_OR_RETURN(StoreManifest m, parse_manifest(path, text.str()));
    if (m.num_targets != static_cast<int>(targets.size())) {
      return invalid_argument("kvstore target {}: the store was created with {} targets, {} given "
                              "(give all of them, in the original order)",
                              targets[i], m.num_targets, targets.size());
    }
    if (m.position != static_cast<int>(i)) {
      return invalid_argument("kvstore target {}: it is target {} of the store but listed as {} "
                              "(give the targets in the original order)",
                              targets[i], m.position, i);
    }
    if (first >= 0 && (m.store_id != c.store->store_id || m.data_shards != c.store->data_shards ||
                       m.parity_shards != c.store->parity_shards)) {
      return invalid_argument("kvstore targets {} and {} belong to different stores ({} {}+{} vs {} "
                              "{}+{})", targets[first], targets[i], c.store->store_id,
                              c.store->data_shards, c.store->parity_shards, m.store_id,
                              m.data_shards, m.parity_shards);
    }
    if (first < 0) {
      first = static_cast<int>(i);
      c.store = m;
      c.store->position = -1;
    }
    c.state[i] = TargetState::kOk;
  }
  return c;
}

Status write_manifest(const std::string& target, const StoreManifest& m) {
  const std::string root = target + "/" + kLayoutDir;
  if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST)
    return io_error("kvstore target {}: cannot create {}: {}", target, root, std::strerror(errno));
  const std::string path = manifest_path(target);
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), new_store_id().substr(0, 8));
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kMagic << "\nstore_id=" << m.store_id << "\ntargets=" << m.num_targets
        << "\nposition=" << m.position << "\ndata_shards=" << m.data_shards
        << "\nparity_shards=" << m.parity_shards << "\n";
    out.flush();
    if (!out.good()) {
      ::unlink(tmp.c_str());
      return io_error("kvstore target {}: cannot write {}", target, tmp);
    }
  }
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0 && err != EEXIST)
    return io_error("kvstore target {}: cannot publish {}: {}", target, path, std::strerror(err));
  return Status::ok();
}

}  // namespace deepinfer::kvstore
