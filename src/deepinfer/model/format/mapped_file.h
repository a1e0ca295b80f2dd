// A whole file mapped read-only into memory: model readers parse and hand out views into it,
// and keep it alive through shared_ptr for as long as any tensor view exists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::format {

class MappedFile {
 public:
  // Fails with a message naming the path when the file is missing, a directory, empty,
  // unreadable or cannot be mapped. `prefetch` asks the kernel to start reading it in.
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path, bool prefetch = false);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace deepinfer::format
