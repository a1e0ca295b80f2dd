// MappedFile: contents visible through the mapping, and clear errors for unusable paths.
#include "deepinfer/model/format/mapped_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "temp_dir.h"

namespace deepinfer::format {
namespace {

using testing::TempDir;

TEST(MappedFile, MapsWholeFile) {
  TempDir dir;
  std::string path = dir.file("x.bin");
  testing::write_file(path, std::string("hello mapping"));
  auto f = MappedFile::open(path, /*prefetch=*/true);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ((*f)->size(), 13u);
  EXPECT_EQ(std::memcmp((*f)->data(), "hello mapping", 13), 0);
  EXPECT_EQ((*f)->path(), path);
}

TEST(MappedFile, ExplainsUnusablePaths) {
  TempDir dir;
  auto missing = MappedFile::open(dir.file("nope.gguf"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), dir.file("nope.gguf") + ": no such file");

  auto is_dir = MappedFile::open(dir.path());
  EXPECT_NE(is_dir.status().message().find("is a directory"), std::string::npos);

  testing::write_file(dir.file("empty"), std::string());
  auto empty = MappedFile::open(dir.file("empty"));
  EXPECT_EQ(empty.status().message(), dir.file("empty") + ": file is empty");

  if (::geteuid() != 0) {  // root reads through any permission bits
    testing::write_file(dir.file("secret"), std::string("x"));
    ::chmod(dir.file("secret").c_str(), 0);
    auto denied = MappedFile::open(dir.file("secret"));
    EXPECT_NE(denied.status().message().find("permission denied"), std::string::npos);
  }
}

}  // namespace
}  // namespace deepinfer::format
