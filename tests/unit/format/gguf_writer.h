// Test-only GGUF writer: builds valid files, and lets a test override any header field, count,
// offset or type id to produce precisely broken ones.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer::testing {

class ByteSink {
 public:
  template <typename T>
  void put(T v) {
    size_t n = bytes_.size();
    bytes_.resize(n + sizeof(T));
    std::memcpy(bytes_.data() + n, &v, sizeof(T));
  }
  void put_str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void put_bytes(const std::vector<uint8_t>& b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  void pad_to(size_t alignment) {
    while (bytes_.size() % alignment) bytes_.push_back(0);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// GGUF value type ids.
enum GgufType : uint32_t {
  kGU8 = 0,
  kGI8,
  kGU16,
  kGI16,
  kGU32,
  kGI32,
  kGF32,
  kGBool,
  kGString,
  kGArray,
  kGU64,
  kGI64,
  kGF64,
};

class GgufWriter {
 public:
  struct TensorSpec {
    std::string name;
    uint32_t type_id = 0;
    std::vector<int64_t> ne;  // ggml order
    std::vector<uint8_t> data;
    std::optional<uint64_t> offset;  // override the computed (aligned) offset
  };

  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  size_t alignment = 32;  // used for layout; add a general.alignment kv to declare another
  std::optional<uint64_t> n_tensors_override, n_kv_override;

  // A key/value whose value bytes the caller writes (after the type id).
  template <typename Fn>
  void add_kv(const std::string& key, uint32_t type, Fn&& write_value) {
    ByteSink s;
    s.put_str(key);
    s.put<uint32_t>(type);
    write_value(s);
    kvs_.push_back(std::move(s.bytes()));
  }
  template <typename T>
  void add_scalar(const std::string& key, uint32_t type, T v) {
    add_kv(key, type, [&](ByteSink& s) { s.put<T>(v); });
  }
  void add_string(const std::string& key, const std::string& v) {
    add_kv(key, kGString, [&](ByteSink& s) { s.put_str(v); });
  }
  template <typename T>
  void add_array(const std::string& key, uint32_t elem_type, const std::vector<T>& v) {
    add_kv(key, kGArray, [&](ByteSink& s) {
      s.put<uint32_t>(elem_type);
      s.put<uint64_t>(v.size());
      for (const T& e : v) s.put<T>(e);
    });
  }
  void add_string_array(const std::string& key, const std::vector<std::string>& v) {
    add_kv(key, kGArray, [&](ByteSink& s) {
      s.put<uint32_t>(kGString);
      s.put<uint64_t>(v.size());
      for (const auto& e : v) s.put_str(e);
    });
  }
  void add_tensor(TensorSpec t) { tensors_.push_back(std::move(t)); }

  std::vector<uint8_t> build() const {
    ByteSink s;
    s.put<uint32_t>(magic);
    s.put<uint32_t>(version);
    s.put<uint64_t>(n_tensors_override.value_or(tensors_.size()));
    s.put<uint64_t>(n_kv_override.value_or(kvs_.size()));
    for (const auto& kv : kvs_) s.put_bytes(kv);
    uint64_t next = 0;
    for (const auto& t : tensors_) {
      s.put_str(t.name);
      s.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
      for (int64_t d : t.ne) s.put<int64_t>(d);
      s.put<uint32_t>(t.type_id);
      s.put<uint64_t>(t.offset.value_or(next));
      next += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    s.pad_to(alignment);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      s.put_bytes(tensors_[i].data);
      if (i + 1 < tensors_.size()) s.pad_to(alignment);
    }
    return std::move(s.bytes());
  }

 private:
  std::vector<std::vector<uint8_t>> kvs_;
  std::vector<TensorSpec> tensors_;
};

// Bytes 0, 1, 2, ... (mod 251), so a misplaced view shows up as wrong contents.
inline std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed = 0) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i + seed) % 251);
  return b;
}

}  // namespace deepinfer::testing
