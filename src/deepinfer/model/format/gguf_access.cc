// GgufFile's read side: typed metadata getters and tensor lookup over the parsed file.
#include <limits>

#include "deepinfer/model/format/gguf.h"
#include "deepinfer/model/format/mapped_file.h"

namespace deepinfer::format {
namespace {

using Kind = GgufValue::Kind;

bool is_integer(Kind k) {
  switch (k) {
    case Kind::kU8:
    case Kind::kI8:
    case Kind::kU16:
    case Kind::kI16:
    case Kind::kU32:
    case Kind::kI32:
    case Kind::kU64:
    case Kind::kI64:
      return true;
    default:
      return false;
  }
}

}  // namespace

GgufFile::~GgufFile() = default;

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(std::string(key));
  return it == metadata_.end() ? nullptr : &it->second;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || !is_integer(v->kind)) return std::nullopt;
  if (auto* i = std::get_if<int64_t>(&v->value)) return *i;
  uint64_t u = std::get<uint64_t>(v->value);
  if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(u);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto* d = std::get_if<double>(&v->value)) return *d;
  if (!is_integer(v->kind)) return std::nullopt;
  if (auto* i = std::get_if<int64_t>(&v->value)) return static_cast<double>(*i);
  return static_cast<double>(std::get<uint64_t>(v->value));
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->kind != Kind::kBool) return std::nullopt;
  return std::get<bool>(v->value);
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->kind != Kind::kString) return std::nullopt;
  return std::get<std::string>(v->value);
}

const std::vector<std::string>* GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  return v && v->kind == Kind::kArray ? std::get_if<std::vector<std::string>>(&v->value) : nullptr;
}

const std::vector<int64_t>* GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  return v && v->kind == Kind::kArray ? std::get_if<std::vector<int64_t>>(&v->value) : nullptr;
}

const std::vector<double>* GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  return v && v->kind == Kind::kArray ? std::get_if<std::vector<double>>(&v->value) : nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::tensor(const GgufTensorInfo& info) const {
  Tensor t;
  t.dtype = info.dtype;
  t.ndim = info.ndim;
  for (int i = 0; i < info.ndim; ++i) t.shape[i] = info.ne[info.ndim - 1 - i];
  t.data = info.data;
  t.owner = file_;
  return t;
}

}  // namespace deepinfer::format
