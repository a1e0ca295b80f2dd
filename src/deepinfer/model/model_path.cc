// Resolution order: an existing path wins (file -> GGUF, directory -> HF layout); otherwise a
// catalogue name; otherwise an error that says which of the three was expected.
#include "deepinfer/model/model_path.h"

#include <sys/stat.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "deepinfer/model/catalog.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kAccepted =
    "--model takes a .gguf file, a Hugging Face model directory or a catalogue name";

bool ends_with_gguf(std::string_view s) {
  if (s.size() < 5) return false;
  std::string tail(s.substr(s.size() - 5));
  for (auto& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return tail == ".gguf";
}

bool has_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

std::string known_names() {
  std::string s;
  for (const auto& e : catalog()) s += (s.empty() ? "" : ", ") + e.name;
  return s;
}

Result<ResolvedModel> resolve_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(dir) / "config.json", ec)) {
    return invalid_argument("{}: not a model directory: it has no config.json ({})", dir,
                            kAccepted);
  }
  bool has_weights = false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".safetensors") has_weights = true;
  }
  if (ec) return io_error("{}: cannot list the directory: {}", dir, ec.message());
  if (!has_weights)
    return invalid_argument("{}: has config.json but no *.safetensors weights", dir);
  std::string clean = dir;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  std::string name = fs::path(clean).filename().string();
  return ResolvedModel{ResolvedModel::kHfDir, dir, name.empty() ? clean : name};
}

}  // namespace

Result<ResolvedModel> resolve_model(std::string_view arg) {
  return resolve_model(arg, deepinfer_home());
}

Result<ResolvedModel> resolve_model(std::string_view arg_in, const std::string& home) {
  std::string arg(arg_in.empty() ? kDefaultModelName : arg_in);
  struct stat st {};
  if (::stat(arg.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return resolve_dir(arg);
    if (!ends_with_gguf(arg) && !has_gguf_magic(arg)) {
      return invalid_argument("{}: not a GGUF file ({})", arg, kAccepted);
    }
    return ResolvedModel{ResolvedModel::kGguf, arg, fs::path(arg).stem().string()};
  }
  if (const CatalogEntry* e = find_catalog_entry(arg)) {
    std::string path = model_file_path(*e, home);
    if (::stat(path.c_str(), &st) != 0) {
      return not_found("model '{}' is not downloaded; run: deepinfer pull {}", e->name, e->name);
    }
    if (static_cast<uint64_t>(st.st_size) != e->size) {
      return corrupt(
          "model '{}' at {} is incomplete or damaged ({} bytes, expected {}); run: "
          "deepinfer pull {}",
          e->name, path, st.st_size, e->size, e->name);
    }
    return ResolvedModel{ResolvedModel::kGguf, path, e->name};
  }
  if (arg.find('/') != std::string::npos || ends_with_gguf(arg)) {
    return not_found("{}: no such file or directory", arg);
  }
  return not_found("model '{}' is not a file, a directory or a catalogue name (known: {})", arg,
                   known_names());
}

}  // namespace deepinfer::model
