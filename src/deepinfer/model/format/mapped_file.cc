// mmap of a whole file, MAP_PRIVATE and read-only, with errors that say which file and why.
#include "deepinfer/model/format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace deepinfer::format {
namespace {

Status open_error(const std::string& path, int err) {
  switch (err) {
    case ENOENT:
      return not_found("{}: no such file", path);
    case ENOTDIR:
      return not_found("{}: no such file (a parent is not a directory)", path);
    case EACCES:
    case EPERM:
      return io_error("{}: permission denied", path);
    default:
      return io_error("{}: cannot open: {}", path, std::strerror(err));
  }
}

}  // namespace

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path, bool prefetch) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return open_error(path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return io_error("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return invalid_argument("{}: is a directory, not a file", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument("{}: is not a regular file", path);
  }
  if (st.st_size == 0) {
    ::close(fd);
    return corrupt("{}: file is empty", path);
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_err = errno;
  ::close(fd);  // the mapping holds its own reference to the file
  if (p == MAP_FAILED)
    return io_error("{}: cannot mmap {} bytes: {}", path, size, std::strerror(map_err));
  if (prefetch) ::madvise(p, size, MADV_WILLNEED);  // advisory only; failure is harmless

  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->data_ = static_cast<const uint8_t*>(p);
  file->size_ = size;
  return file;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace deepinfer::format
