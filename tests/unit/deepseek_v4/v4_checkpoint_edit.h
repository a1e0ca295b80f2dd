// Edited copies of a DeepSeek-V4 fixture for the loader tests: the safetensors header and the
// config as JSON and the data bytes, changed in memory, written to a temporary directory, loaded.
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "v4_fixture.h"

namespace deepinfer::v4test {

struct Checkpoint {
  nlohmann::json header, config;
  std::string data;  // the bytes after the header
};

inline Checkpoint read_checkpoint(const std::string& fixture) {
  const std::string src = fixture_dir(fixture);
  std::ifstream in(src + "/model.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  Checkpoint c;
  c.header = nlohmann::json::parse(bytes.substr(8, n));
  c.data = bytes.substr(8 + n);
  std::ifstream cfg(src + "/config.json");
  c.config = nlohmann::json::parse(cfg);
  return c;
}

// Writes `c` to a fresh directory (its path in *dir), loads it, removes the directory (the
// mapped file stays readable).
inline Result<std::unique_ptr<model::Model>> load_checkpoint(const std::string& tag,
                                                             const Checkpoint& c,
                                                             std::string* dir = nullptr) {
  namespace fs = std::filesystem;
  const fs::path d =
      fs::temp_directory_path() / ("deepinfer_v4_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  std::string header = c.header.dump();
  header.resize((header.size() + 7) / 8 * 8, ' ');
  const uint64_t n = header.size();
  std::ofstream out(d / "model.safetensors", std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << c.data;
  out.close();
  std::ofstream(d / "config.json") << c.config.dump(2);
  auto m = open_dir(d.string());
  fs::remove_all(d);
  if (dir) *dir = d.string();
  return m;
}

// The one-line error loading `c` gives, naming the checkpoint ("" and a failure if it loads).
inline std::string checkpoint_error(const std::string& tag, const Checkpoint& c) {
  std::string dir;
  auto m = load_checkpoint(tag, c, &dir);
  EXPECT_FALSE(m.is_ok()) << tag;
  if (m.is_ok()) return "";
  const std::string msg = m.status().message();
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  EXPECT_NE(msg.find(dir), std::string::npos) << "names the checkpoint: " << msg;
  return msg;
}

// Overwrites the first bytes of tensor `name`'s data.
inline void patch(Checkpoint& c, const std::string& name, const std::string& bytes) {
  const uint64_t at = c.header.at(name).at("data_offsets")[0].get<uint64_t>();
  c.data.replace(at, bytes.size(), bytes);
}

}  // namespace deepinfer::v4test
