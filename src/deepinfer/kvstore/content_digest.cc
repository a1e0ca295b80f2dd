// Weights digests with a small on-disk cache. The cache key includes ctime_ns: mtime can be set
// back with utime(2), but any write to the file moves its ctime, which users cannot set.
#include "deepinfer/kvstore/content_digest.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <xxhash.h>

namespace deepinfer::kvstore {
namespace {

std::string file_identity(const std::string& path, const struct stat& st) {
  return fmt::format("{} {} {} {} {} {}", st.st_dev, st.st_ino, st.st_size,
                     int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                     int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec, path);
}

std::string hex128(XXH128_hash_t h) { return fmt::format("{:016x}{:016x}", h.high64, h.low64); }

Result<std::string> hash_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("{}: cannot open to hash: {}", path, std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  std::vector<char> buf(size_t{8} << 20);
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      XXH3_freeState(state);
      ::close(fd);
      return io_error("{}: read failed while hashing: {}", path, std::strerror(err));
    }
    if (n == 0) break;
    XXH3_128bits_update(state, buf.data(), static_cast<size_t>(n));
  }
  std::string out = hex128(XXH3_128bits_digest(state));
  XXH3_freeState(state);
  ::close(fd);
  return out;
}

// identity -> digest. One "<digest> <identity>" per line; unreadable lines are ignored.
std::map<std::string, std::string> load_cache(const std::string& file) {
  std::map<std::string, std::string> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    if (sp != 32) continue;
    out[line.substr(33)] = line.substr(0, 32);
  }
  return out;
}

void save_cache(const std::string& file, const std::map<std::string, std::string>& cache) {
  const size_t slash = file.rfind('/');
  if (slash != std::string::npos) {
    std::string dir = file.substr(0, slash);
    for (size_t p = 1; p <= dir.size(); ++p) {
      if (p == dir.size() || dir[p] == '/') ::mkdir(dir.substr(0, p).c_str(), 0755);
    }
  }
  const std::string tmp = fmt::format("{}.tmp.{}", file, ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;  // a read-only home only costs re-hashing next time
    for (const auto& [id, digest] : cache) out << digest << ' ' << id << '\n';
    if (!out.good()) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) ::unlink(tmp.c_str());
}

struct Hasher {
  std::map<std::string, std::string> cache;
  bool dirty = false;

  Result<std::string> of_file(const std::string& path, const struct stat& st) {
    const std::string id = file_identity(path, st);
    if (auto it = cache.find(id); it != cache.end()) return it->second;
    auto h = hash_file(path);
    if (!h.is_ok()) return h;
    struct stat after;
    // Written while we read it: the digest names no stable content, so do not remember it.
    if (::stat(path.c_str(), &after) == 0 && file_identity(path, after) == id) {
      // One line per path: the old identity of a rewritten file is of no further use.
      const std::string suffix = " " + path;
      std::erase_if(cache, [&](const auto& kv) { return kv.first.ends_with(suffix); });
      cache[id] = *h;
      dirty = true;
    }
    return h;
  }
};

}  // namespace

Result<std::string> content_digest(const std::string& path_arg, const ContentDigestOptions& options) {
  char* real = ::realpath(path_arg.c_str(), nullptr);
  if (!real) return io_error("{}: cannot resolve: {}", path_arg, std::strerror(errno));
  const std::string path(real);
  std::free(real);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return io_error("{}: {}", path, std::strerror(errno));
  Hasher h;
  if (!options.cache_file.empty()) h.cache = load_cache(options.cache_file);
  std::string out;
  if (S_ISREG(st.st_mode)) {
    DI_ASSIGN_OR_RETURN(out, h.of_file(path, st));
  } else if (S_ISDIR(st.st_mode)) {
    DIR* d = ::opendir(path.c_str());
    if (!d) return io_error("{}: cannot list: {}", path, std::strerror(errno));
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    std::string listing;
    for (const std::string& name : names) {
      const std::string p = path + "/" + name;
      struct stat fst;
      if (::stat(p.c_str(), &fst) != 0 || !S_ISREG(fst.st_mode)) continue;
      DI_ASSIGN_OR_RETURN(std::string fd, h.of_file(p, fst));
      listing += fmt::format("{}\n{}\n", name, fd);
    }
    out = hex128(XXH3_128bits(listing.data(), listing.size()));
  } else {
    return invalid_argument("{}: neither a file nor a directory", path);
  }
  if (h.dirty && !options.cache_file.empty()) save_cache(options.cache_file, h.cache);
  return out;
}

}  // namespace deepinfer::kvstore
