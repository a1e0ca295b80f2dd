// GGUF v2/v3 parser. Every read is bounds-checked against the mapping, every count is checked
// against the bytes left before anything is allocated, and all size arithmetic is overflow-safe,
// so a hostile or truncated file yields a Status naming the file and the problem, never a crash.
#include "deepinfer/model/format/gguf.h"

#include <algorithm>
#include <cstring>

#include "deepinfer/base/check.h"
#include "deepinfer/model/format/mapped_file.h"

namespace deepinfer::format {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr size_t kDefaultAlignment = 32;
// Smallest encodings, used to reject counts that cannot fit in the bytes left.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key length, value type, a 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, ndim, type, offset

using Kind = GgufValue::Kind;

// Encoded size of one scalar of this kind; 8 (the length prefix) for strings, 0 if unknown.
uint64_t scalar_bytes(Kind k) {
  switch (k) {
    case Kind::kU8:
    case Kind::kI8:
    case Kind::kBool:
      return 1;
    case Kind::kU16:
    case Kind::kI16:
      return 2;
    case Kind::kU32:
    case Kind::kI32:
    case Kind::kF32:
      return 4;
    case Kind::kU64:
    case Kind::kI64:
    case Kind::kF64:
    case Kind::kString:
      return 8;
    default:
      return 0;
  }
}

}  // namespace

class GgufParser {
 public:
  GgufParser(GgufFile& f, const uint8_t* data, size_t size) : f_(f), data_(data), size_(size) {}

  Status parse() {
    context_ = "header";
    uint32_t magic = 0;
    DI_RETURN_IF_ERROR(read(&magic));
    if (magic != kMagic) {
      return corrupt(
          "{}: not a GGUF file (magic bytes {:02x} {:02x} {:02x} {:02x}, expected 'GGUF')",
          f_.path_, data_[0], data_[1], data_[2], data_[3]);
    }
    uint32_t version = 0;
    DI_RETURN_IF_ERROR(read(&version));
    if (version != 2 && version != 3) {
      if (version != 0 && (version & 0xffff) == 0) {
        return unsupported("{}: big-endian GGUF is not supported", f_.path_);
      }
      return unsupported("{}: GGUF version {} is not supported (only versions 2 and 3)", f_.path_,
                         version);
    }
    f_.version_ = version;
    uint64_t n_tensors = 0, n_kv = 0;
    DI_RETURN_IF_ERROR(read(&n_tensors));
    DI_RETURN_IF_ERROR(read(&n_kv));
    if (n_kv > remaining() / kMinKvBytes) {
      return corrupt("{}: metadata count {} cannot fit in a file of {} bytes", f_.path_, n_kv,
                     size_);
    }
    if (n_tensors > remaining() / kMinTensorInfoBytes) {
      return corrupt("{}: tensor count {} cannot fit in a file of {} bytes", f_.path_, n_tensors,
                     size_);
    }
    for (uint64_t i = 0; i < n_kv; ++i) DI_RETURN_IF_ERROR(read_kv(i));
    DI_RETURN_IF_ERROR(read_alignment());
    f_.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) DI_RETURN_IF_ERROR(read_tensor_info(i));
    return place_tensor_data();
  }

 private:
  size_t remaining() const { return size_ - pos_; }

  Status need(uint64_t n) {
    if (n > remaining()) {
      return corrupt("{}: truncated: {} at byte {} needs {} bytes but the file has {}", f_.path_,
                     context_, pos_, n, size_);
    }
    return Status::ok();
  }

  template <typename T>
  Status read(T* out) {
    DI_RETURN_IF_ERROR(need(sizeof(T)));
    std::memcpy(out, data_ + pos_, sizeof(T));  // the file is little-endian, like the host
    pos_ += sizeof(T);
    return Status::ok();
  }

  Status read_string(std::string* out) {
    uint64_t len = 0;
    DI_RETURN_IF_ERROR(read(&len));
    if (len > remaining()) {
      return corrupt(
          "{}: truncated: {} has a string of length {} at byte {} but only {} bytes follow",
          f_.path_, context_, len, pos_ - 8, remaining());
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::ok();
  }

  Status read_kind(Kind* out) {
    uint32_t t = 0;
    DI_RETURN_IF_ERROR(read(&t));
    if (t > static_cast<uint32_t>(Kind::kF64)) {
      return corrupt("{}: {} has unknown value type {}", f_.path_, context_, t);
    }
    *out = static_cast<Kind>(t);
    return Status::ok();
  }

  // One scalar as its widest kind: unsigned -> uint64, signed -> int64, float -> double.
  template <typename T, typename Wide>
  Status read_as(Wide* out) {
    T v{};
    DI_RETURN_IF_ERROR(read(&v));
    *out = static_cast<Wide>(v);
    return Status::ok();
  }

  Status read_scalar(Kind k, GgufValue* v) {
    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
    switch (k) {
      case Kind::kU8:
        DI_RETURN_IF_ERROR((read_as<uint8_t>(&u)));
        v->value = u;
        break;
      case Kind::kU16:
        DI_RETURN_IF_ERROR((read_as<uint16_t>(&u)));
        v->value = u;
        break;
      case Kind::kU32:
        DI_RETURN_IF_ERROR((read_as<uint32_t>(&u)));
        v->value = u;
        break;
      case Kind::kU64:
        DI_RETURN_IF_ERROR((read_as<uint64_t>(&u)));
        v->value = u;
        break;
      case Kind::kI8:
        DI_RETURN_IF_ERROR((read_as<int8_t>(&i)));
        v->value = i;
        break;
      case Kind::kI16:
        DI_RETURN_IF_ERROR((read_as<int16_t>(&i)));
        v->value = i;
        break;
      case Kind::kI32:
        DI_RETURN_IF_ERROR((read_as<int32_t>(&i)));
        v->value = i;
        break;
      case Kind::kI64:
        DI_RETURN_IF_ERROR((read_as<int64_t>(&i)));
        v->value = i;
        break;
      case Kind::kF32:
        DI_RETURN_IF_ERROR((read_as<float>(&d)));
        v->value = d;
        break;
      case Kind::kF64:
        DI_RETURN_IF_ERROR((read_as<double>(&d)));
        v->value = d;
        break;
      case Kind::kBool:
        DI_RETURN_IF_ERROR((read_as<uint8_t>(&u)));
        v->value = u != 0;
        break;
      case Kind::kString: {
        std::string s;
        DI_RETURN_IF_ERROR(read_string(&s));
        v->value = std::move(s);
        break;
      }
      case Kind::kArray:
        DI_CHECK(false, "arrays are read by read_array");
        break;
    }
    return Status::ok();
  }

  // Integer and bool arrays become vector<int64_t> (u64 elements above INT64_MAX keep their
  // bit pattern), float arrays vector<double>, string arrays vector<string>.
  template <typename T>
  Status read_int_elems(uint64_t n, std::vector<int64_t>* out) {
    for (uint64_t j = 0; j < n; ++j) {
      T e{};
      DI_RETURN_IF_ERROR(read(&e));
      out->push_back(static_cast<int64_t>(e));
    }
    return Status::ok();
  }

  Status read_array(GgufValue* v) {
    Kind ek;
    DI_RETURN_IF_ERROR(read_kind(&ek));
    if (ek == Kind::kArray) {
      return unsupported("{}: {} is an array of arrays, which is not supported", f_.path_,
                         context_);
    }
    uint64_t n = 0;
    DI_RETURN_IF_ERROR(read(&n));
    if (n > remaining() / scalar_bytes(ek)) {
      return corrupt("{}: {} is an array of {} elements that cannot fit in the {} bytes left",
                     f_.path_, context_, n, remaining());
    }
    v->array_kind = ek;
    if (ek == Kind::kString) {
      std::vector<std::string> out;
      out.reserve(n);
      for (uint64_t j = 0; j < n; ++j) DI_RETURN_IF_ERROR(read_string(&out.emplace_back()));
      v->value = std::move(out);
    } else if (ek == Kind::kF32 || ek == Kind::kF64) {
      std::vector<double> out;
      out.reserve(n);
      for (uint64_t j = 0; j < n; ++j) {
        double d = 0;
        DI_RETURN_IF_ERROR(ek == Kind::kF32 ? read_as<float>(&d) : read_as<double>(&d));
        out.push_back(d);
      }
      v->value = std::move(out);
    } else {
      std::vector<int64_t> out;
      out.reserve(n);
      switch (ek) {
        case Kind::kU8:
        case Kind::kBool:
          DI_RETURN_IF_ERROR(read_int_elems<uint8_t>(n, &out));
          break;
        case Kind::kI8:
          DI_RETURN_IF_ERROR(read_int_elems<int8_t>(n, &out));
          break;
        case Kind::kU16:
          DI_RETURN_IF_ERROR(read_int_elems<uint16_t>(n, &out));
          break;
        case Kind::kI16:
          DI_RETURN_IF_ERROR(read_int_elems<int16_t>(n, &out));
          break;
        case Kind::kU32:
          DI_RETURN_IF_ERROR(read_int_elems<uint32_t>(n, &out));
          break;
        case Kind::kI32:
          DI_RETURN_IF_ERROR(read_int_elems<int32_t>(n, &out));
          break;
        case Kind::kU64:
          DI_RETURN_IF_ERROR(read_int_elems<uint64_t>(n, &out));
          break;
        default:
          DI_RETURN_IF_ERROR(read_int_elems<int64_t>(n, &out));
          break;
      }
      if (ek == Kind::kBool) {
        for (auto& b : out) b = b != 0;
      }
      v->value = std::move(out);
    }
    return Status::ok();
  }

  Status read_kv(uint64_t index) {
    context_ = fmt::format("key of metadata entry {}", index);
    std::string key;
    DI_RETURN_IF_ERROR(read_string(&key));
    context_ = fmt::format("metadata '{}'", key);
    GgufValue v;
    DI_RETURN_IF_ERROR(read_kind(&v.kind));
    if (v.kind == Kind::kArray) {
      DI_RETURN_IF_ERROR(read_array(&v));
    } else {
      DI_RETURN_IF_ERROR(read_scalar(v.kind, &v));
    }
    if (!f_.metadata_.emplace(key, std::move(v)).second) {
      return corrupt("{}: duplicate metadata key '{}'", f_.path_, key);
    }
    return Status::ok();
  }

  Status read_alignment() {
    f_.alignment_ = kDefaultAlignment;
    const GgufValue* v = f_.find("general.alignment");
    if (!v) return Status::ok();
    auto a = f_.get_int("general.alignment");
    if (!a || *a <= 0 || (*a & (*a - 1)) != 0 || *a > (int64_t{1} << 30)) {
      return corrupt("{}: general.alignment must be a power of two integer up to 2^30", f_.path_);
    }
    f_.alignment_ = static_cast<size_t>(*a);
    return Status::ok();
  }

  Status read_tensor_info(uint64_t index) {
    context_ = fmt::format("name of tensor info {}", index);
    GgufTensorInfo t;
    DI_RETURN_IF_ERROR(read_string(&t.name));
    context_ = fmt::format("info of tensor '{}'", t.name);
    uint32_t ndim = 0;
    DI_RETURN_IF_ERROR(read(&ndim));
    if (ndim > 4) {
      return unsupported("{}: tensor '{}' has {} dimensions; at most 4 are supported", f_.path_,
                         t.name, ndim);
    }
    t.ndim = static_cast<int>(ndim);
    int64_t numel = 1;
    for (uint32_t d = 0; d < ndim; ++d) {
      DI_RETURN_IF_ERROR(read(&t.ne[d]));
      if (t.ne[d] < 0) {
        return corrupt("{}: tensor '{}' has a negative dimension {}", f_.path_, t.name, t.ne[d]);
      }
      if (__builtin_mul_overflow(numel, t.ne[d], &numel)) {
        return corrupt("{}: tensor '{}' has an absurd element count (dimensions overflow)",
                       f_.path_, t.name);
      }
    }
    uint32_t type_id = 0;
    DI_RETURN_IF_ERROR(read(&type_id));
    DI_RETURN_IF_ERROR(read(&t.offset));
    auto dtype = dtype_from_ggml_id(type_id);
    if (!dtype) {
      return unsupported("{}: unsupported tensor type {} for tensor '{}'", f_.path_, type_id,
                         t.name);
    }
    t.dtype = *dtype;
    DTypeInfo info = *dtype_info(t.dtype);
    if (t.ne[0] % info.block_elems != 0) {
      return corrupt("{}: tensor '{}' row length {} is not a multiple of the {} block size {}",
                     f_.path_, t.name, t.ne[0], info.name, info.block_elems);
    }
    uint64_t rows = static_cast<uint64_t>(numel == 0 ? 0 : numel / t.ne[0]);
    uint64_t row = 0, nbytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.ne[0] / info.block_elems), info.block_bytes,
                               &row) ||
        __builtin_mul_overflow(row, rows, &nbytes)) {
      return corrupt("{}: tensor '{}' byte size overflows", f_.path_, t.name);
    }
    t.nbytes = nbytes;
    if (t.offset % f_.alignment_ != 0) {
      return corrupt("{}: tensor '{}' offset {} is not a multiple of the alignment {}", f_.path_,
                     t.name, t.offset, f_.alignment_);
    }
    if (!f_.tensor_index_.emplace(t.name, f_.tensors_.size()).second) {
      return corrupt("{}: duplicate tensor name '{}'", f_.path_, t.name);
    }
    f_.tensors_.push_back(std::move(t));
    return Status::ok();
  }

  // The data section starts at the next alignment boundary after the tensor infos.
  Status place_tensor_data() {
    uint64_t data_offset =
        (static_cast<uint64_t>(pos_) + f_.alignment_ - 1) / f_.alignment_ * f_.alignment_;
    std::vector<const GgufTensorInfo*> by_offset;
    by_offset.reserve(f_.tensors_.size());
    for (auto& t : f_.tensors_) {
      uint64_t begin = 0, end = 0;
      if (__builtin_add_overflow(data_offset, t.offset, &begin) ||
          __builtin_add_overflow(begin, t.nbytes, &end) || end > size_) {
        return corrupt("{}: truncated: tensor '{}' data ends at byte {} but the file has {}",
                       f_.path_, t.name,
                       end < begin ? std::string("beyond 2^64") : std::to_string(end), size_);
      }
      t.data = data_ + std::min<uint64_t>(begin, size_);
      if (t.nbytes > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](auto* a, auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const auto* prev = by_offset[i - 1];
      if (prev->offset + prev->nbytes > by_offset[i]->offset) {
        return corrupt("{}: tensors '{}' and '{}' overlap in the data section", f_.path_,
                       prev->name, by_offset[i]->name);
      }
    }
    return Status::ok();
  }

  GgufFile& f_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string context_;  // what is being read, for error messages
};

Result<std::shared_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  DI_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->file_ = mapped;
  GgufParser parser(*f, mapped->data(), mapped->size());
  DI_RETURN_IF_ERROR(parser.parse());
  return f;
}

}  // namespace deepinfer::format
