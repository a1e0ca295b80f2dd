// Safetensors reader: one .safetensors file, or a Hugging Face model directory whose weights are
// a lone model.safetensors or shards listed in model.safetensors.index.json. Files are mmapped;
// every tensor's dtype, shape and byte range is validated on open, so the views can be trusted.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::format {

class SafetensorsModel {
 public:
  static constexpr std::string_view kIndexName = "model.safetensors.index.json";
  static constexpr std::string_view kSingleName = "model.safetensors";

  // `dir_or_file` is a .safetensors file or a model directory. Errors name the file at fault.
  static Result<std::shared_ptr<SafetensorsModel>> open(const std::string& dir_or_file);

  const std::string& path() const { return path_; }
  // Borrowed view into a shard's mapping (its `owner` keeps that mapping alive); nullptr when
  // absent. Data is not guaranteed to be aligned beyond 1 byte: safetensors does not pad.
  const Tensor* find(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  size_t size() const { return tensors_.size(); }
  // The shard file (full path) holding `name`; empty when absent.
  std::string shard_of(std::string_view name) const;
  const std::vector<std::string>& shard_paths() const { return shards_; }
  // A view of the same tensors (sharing the mappings) where every name starting with one of the
  // `from` prefixes has it replaced by its `to` (first match wins); other names are dropped. For
  // checkpoints that nest one model in another (LLaVA's language_model.*).
  std::shared_ptr<SafetensorsModel> with_prefixes_renamed(
      const std::vector<std::pair<std::string, std::string>>& from_to) const;
  // "__metadata__" of every shard merged (the first shard wins on conflicts).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Entry {
    Tensor tensor;
    size_t shard = 0;
  };
  SafetensorsModel() = default;
  Status add_file(const std::string& file);
  Status add_index(const std::string& dir, const std::string& index_path);

  std::string path_;
  std::vector<std::string> shards_;
  std::map<std::string, Entry, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace deepinfer::format
