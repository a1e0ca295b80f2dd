// GGUF v2/v3 reader: the file is mmapped; metadata is parsed and validated up front, and every
// tensor's byte range is checked against the file size, so later code can trust the views.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::format {

class MappedFile;

// One metadata value. Arrays are stored as vectors of the element kind.
struct GgufValue {
  enum class Kind {
    kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
    kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
  };
  Kind kind = Kind::kU8;
  Kind array_kind = Kind::kU8;  // element kind when kind == kArray
  std::variant<uint64_t, int64_t, double, bool, std::string,
               std::vector<int64_t>, std::vector<double>, std::vector<std::string>>
      value;
};

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  int ndim = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};  // ggml order: ne[0] is the innermost (row length)
  uint64_t offset = 0;                    // relative to the data section
  size_t nbytes = 0;
  const void* data = nullptr;             // into the mapping
};

class GgufFile {
 public:
  // Opens and validates; errors name the file and what is wrong with it.
  static Result<std::shared_ptr<GgufFile>> open(const std::string& path);
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }

  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  // Typed getters: nullopt when absent or of a kind that cannot convert (any integer kind
  // converts to int64; any number to double).
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  const std::vector<std::string>* get_string_array(std::string_view key) const;
  const std::vector<int64_t>* get_int_array(std::string_view key) const;
  const std::vector<double>* get_float_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // A borrowed view (shape outermost-first) that keeps the mapping alive.
  Tensor tensor(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  std::string path_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  std::shared_ptr<MappedFile> file_;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;

  friend class GgufParser;
};

}  // namespace deepinfer::format
