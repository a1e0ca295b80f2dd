// Safetensors parsing: 8-byte little-endian header length, a JSON header (nlohmann_json) of
// name -> {dtype, shape, data_offsets}, then the data. Offsets are checked for range, size
// (shape x dtype) and overlap; shards of an index are checked against its weight_map.
#include "deepinfer/model/format/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "deepinfer/model/format/mapped_file.h"

namespace deepinfer::format {
namespace {

using json = nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we, before parsing.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

std::optional<DType> dtype_from_name(std::string_view s) {
  static const std::pair<std::string_view, DType> kTable[] = {
      {"F64", DType::kF64},         {"F32", DType::kF32}, {"F16", DType::kF16},
      {"BF16", DType::kBF16},       {"I64", DType::kI64}, {"I32", DType::kI32},
      {"I16", DType::kI16},         {"I8", DType::kI8},   {"F8_E4M3", DType::kF8_E4M3},
      {"F8_E5M2", DType::kF8_E5M2}, {"F8_E8M0", DType::kF8_E8M0},
  };
  for (const auto& [name, t] : kTable) {
    if (name == s) return t;
  }
  return std::nullopt;
}

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

struct Range {
  uint64_t begin, end;
  const std::string* name;
};

// Parses one tensor entry of the header into `out` (data pointer set by the caller).
Status parse_entry(const std::string& path, const std::string& name, const json& e,
                   uint64_t data_size, Tensor* out, Range* range) {
  if (!e.is_object()) return corrupt("{}: header entry '{}' is not an object", path, name);
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string() || sh == e.end() || !sh->is_array() || off == e.end() ||
      !off->is_array()) {
    return corrupt("{}: tensor '{}' needs a string dtype, a shape array and a data_offsets array",
                   path, name);
  }
  std::string dname = dt->get<std::string>();
  auto dtype = dtype_from_name(dname);
  if (!dtype) return unsupported("{}: unsupported dtype '{}' for tensor '{}'", path, dname, name);
  if (sh->size() > static_cast<size_t>(Tensor::kMaxDims)) {
    return unsupported("{}: tensor '{}' has {} dimensions; at most {} are supported", path, name,
                       sh->size(), Tensor::kMaxDims);
  }
  out->dtype = *dtype;
  out->ndim = static_cast<int>(sh->size());
  uint64_t numel = 1;
  for (size_t i = 0; i < sh->size(); ++i) {
    const json& d = (*sh)[i];
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return corrupt("{}: tensor '{}' has a shape entry that is not a non-negative integer: {}",
                     path, name, d.dump());
    }
    out->shape[i] = static_cast<int64_t>(d.get<uint64_t>());
    if (__builtin_mul_overflow(numel, d.get<uint64_t>(), &numel)) {
      return corrupt("{}: tensor '{}' has an absurd shape (element count overflows)", path, name);
    }
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, dtype_info(*dtype)->block_bytes, &nbytes)) {
    return corrupt("{}: tensor '{}' byte size overflows", path, name);
  }
  if (off->size() != 2 || !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
    return corrupt("{}: tensor '{}' data_offsets must be two non-negative integers, got {}", path,
                   name, off->dump());
  }
  uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    return corrupt(
        "{}: tensor '{}' data_offsets [{}, {}) fall outside the data section of {} bytes", path,
        name, begin, end, data_size);
  }
  if (end - begin != nbytes) {
    Tensor shown = *out;
    return corrupt("{}: tensor '{}' has {} data bytes but shape {} of {} needs {}", path, name,
                   end - begin, shown.shape_string(), dname, nbytes);
  }
  *range = {begin, end, nullptr};
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<SafetensorsModel>> SafetensorsModel::open(const std::string& dir_or_file) {
  std::shared_ptr<SafetensorsModel> m(new SafetensorsModel());
  m->path_ = dir_or_file;
  if (!exists(dir_or_file)) return not_found("{}: no such file or directory", dir_or_file);
  if (!is_directory(dir_or_file)) {
    DI_RETURN_IF_ERROR(m->add_file(dir_or_file));
    return m;
  }
  std::string dir = dir_or_file;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::string index = dir + "/" + std::string(kIndexName);
  std::string single = dir + "/" + std::string(kSingleName);
  if (exists(index)) {
    DI_RETURN_IF_ERROR(m->add_index(dir, index));
  } else if (exists(single)) {
    DI_RETURN_IF_ERROR(m->add_file(single));
  } else {
    return not_found("{}: no {} or {} in this directory", dir_or_file, kIndexName, kSingleName);
  }
  return m;
}

Status SafetensorsModel::add_file(const std::string& file) {
  DI_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(file));
  const uint8_t* base = mapped->data();
  const uint64_t size = mapped->size();
  if (size < 8) {
    return corrupt("{}: truncated: the 8-byte header length needs 8 bytes but the file has {}",
                   file, size);
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);  // little-endian on disk, like the host
  if (header_len > size - 8) {
    return corrupt("{}: truncated: header length {} goes beyond the end of the file ({} bytes)",
                   file, header_len, size);
  }
  if (header_len > kMaxHeaderBytes) {
    return corrupt("{}: header length {} exceeds the {} byte limit", file, header_len,
                   kMaxHeaderBytes);
  }
  const char* hb = reinterpret_cast<const char*>(base + 8);
  json header;
  try {
    header = json::parse(hb, hb + header_len);
  } catch (const json::exception& e) {
    return corrupt("{}: header is not valid JSON: {}", file, e.what());
  }
  if (!header.is_object()) return corrupt("{}: header is not a JSON object", file);

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  const size_t shard = shards_.size();
  std::vector<std::pair<std::string, Tensor>> parsed;
  std::vector<Range> ranges;  // non-empty ones only; `name` indexes into `parsed`
  std::vector<size_t> range_owner;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) return corrupt("{}: __metadata__ is not an object", file);
      for (const auto& [k, v] : e.items()) {
        metadata_.emplace(k, v.is_string() ? v.get<std::string>() : v.dump());
      }
      continue;
    }
    Tensor t;
    Range r{};
    DI_RETURN_IF_ERROR(parse_entry(file, name, e, data_size, &t, &r));
    t.data = base + data_start + r.begin;
    t.owner = mapped;
    if (r.end > r.begin) {
      ranges.push_back(r);
      range_owner.push_back(parsed.size());
    }
    parsed.emplace_back(name, std::move(t));
  }
  // Names are filled in once `parsed` stops growing, so the pointers stay valid.
  for (size_t i = 0; i < ranges.size(); ++i) ranges[i].name = &parsed[range_owner[i]].first;
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i - 1].end > ranges[i].begin) {
      return corrupt("{}: tensors '{}' and '{}' overlap in the data section", file,
                     *ranges[i - 1].name, *ranges[i].name);
    }
  }
  for (auto& [name, t] : parsed) {
    if (tensors_.count(name)) {
      return corrupt("{}: tensor '{}' also appears in {}", file, name,
                     shards_[tensors_.find(name)->second.shard]);
    }
    tensors_.emplace(name, Entry{std::move(t), shard});
  }
  shards_.push_back(file);
  return Status::ok();
}

Status SafetensorsModel::add_index(const std::string& dir, const std::string& index_path) {
  DI_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(index_path));
  const char* text = reinterpret_cast<const char*>(mapped->data());
  json index;
  try {
    index = json::parse(text, text + mapped->size());
  } catch (const json::exception& e) {
    return corrupt("{}: not valid JSON: {}", index_path, e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return corrupt("{}: has no weight_map object", index_path);
  }
  const json& weight_map = index["weight_map"];
  std::map<std::string, std::string> shard_path_of;  // shard file name -> full path
  for (const auto& [name, shard] : weight_map.items()) {
    if (!shard.is_string()) {
      return corrupt("{}: weight_map entry for '{}' is not a file name", index_path, name);
    }
    std::string s = shard.get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..") {
      return corrupt("{}: weight_map names shard '{}' outside the model directory", index_path, s);
    }
    if (!shard_path_of.count(s)) {
      std::string full = dir + "/" + s;
      if (!exists(full)) {
        return not_found("{}: shard '{}' (holding tensor '{}') is missing", index_path, s, name);
      }
      shard_path_of.emplace(s, full);
    }
  }
  if (shard_path_of.empty()) return corrupt("{}: weight_map is empty", index_path);
  for (const auto& [s, full] : shard_path_of) DI_RETURN_IF_ERROR(add_file(full));
  for (const auto& [name, shard] : weight_map.items()) {
    auto it = tensors_.find(name);
    const std::string& want = shard_path_of[shard.get<std::string>()];
    if (it == tensors_.end() || shards_[it->second.shard] != want) {
      return corrupt("{}: tensor '{}' is mapped to {} but that shard does not hold it", index_path,
                     name, shard.get<std::string>());
    }
  }
  return Status::ok();
}

const Tensor* SafetensorsModel::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second.tensor;
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, e] : tensors_) out.push_back(name);
  return out;
}

std::string SafetensorsModel::shard_of(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? std::string() : shards_[it->second.shard];
}

std::shared_ptr<SafetensorsModel> SafetensorsModel::with_prefixes_renamed(
    const std::vector<std::pair<std::string, std::string>>& from_to) const {
  std::shared_ptr<SafetensorsModel> m(new SafetensorsModel());
  m->path_ = path_;
  m->shards_ = shards_;
  m->metadata_ = metadata_;
  for (const auto& [name, entry] : tensors_) {
    for (const auto& [from, to] : from_to) {
      if (name.starts_with(from)) {
        m->tensors_.emplace(to + name.substr(from.size()), entry);
        break;
      }
    }
  }
  return m;
}

}  // namespace deepinfer::format
