// Weights identity for the KV store namespace (issue #30): content, not name/size/mtime, for a
// file and for a Hugging Face directory, and the per-file-version cache.
#include <fcntl.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>

#include "deepinfer/kvstore/content_digest.h"
#include "test_util.h"

namespace deepinfer::kvstore {
namespace {

using testing::TempDir;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::in | std::ios::out) << text;  // in place
}

// Rewrites the file in place (same inode and size) and restores its mtime to the nanosecond.
void rewrite_keeping_mtime(const std::string& path, const std::string& text) {
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  write(path, text);
  const timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  struct stat after;
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(after.st_ino, st.st_ino);
  ASSERT_EQ(after.st_size, st.st_size);
  ASSERT_EQ(after.st_mtim.tv_nsec, st.st_mtim.tv_nsec);
}

TEST(ContentDigest, FileOfSameSizeAndMtimeButOtherBytes) {
  TempDir dir;
  const std::string f = dir.path() + "/m.gguf";
  std::ofstream(f) << "weights-AAAA";
  ContentDigestOptions o{dir.path() + "/home/kvstore/weights-digests"};
  auto a = content_digest(f, o);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->size(), 32u);
  auto again = content_digest(f, o);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *a);
  rewrite_keeping_mtime(f, "weights-BBBB");
  auto b = content_digest(f, o);
  ASSERT_TRUE(b.is_ok());
  EXPECT_NE(*b, *a);
  // Same bytes as the first: same digest (content, not time).
  rewrite_keeping_mtime(f, "weights-AAAA");
  EXPECT_EQ(*content_digest(f, o), *a);
  std::ifstream cache(o.cache_file);
  std::string line;
  int lines = 0;
  while (std::getline(cache, line)) ++lines;
  EXPECT_EQ(lines, 1);  // one line per path
}

TEST(ContentDigest, HuggingFaceDirectoryNoticesAReplacedWeightFile) {
  TempDir dir;
  const std::string m = dir.path() + "/model";
  ASSERT_EQ(::mkdir(m.c_str(), 0755), 0);
  std::ofstream(m + "/config.json") << "{}";
  std::ofstream(m + "/model-00001.safetensors") << "tensor-bytes-1";
  std::ofstream(m + "/model-00002.safetensors") << "tensor-bytes-2";
  ContentDigestOptions o{dir.path() + "/cache"};
  auto a = content_digest(m, o);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  // The directory's own mtime does not change when a file inside is rewritten in place.
  rewrite_keeping_mtime(m + "/model-00002.safetensors", "tensor-bytes-X");
  auto b = content_digest(m, o);
  ASSERT_TRUE(b.is_ok());
  EXPECT_NE(*a, *b);
  EXPECT_FALSE(content_digest(dir.path() + "/nope", o).is_ok());
}

}  // namespace
}  // namespace deepinfer::kvstore
