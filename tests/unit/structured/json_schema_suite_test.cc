// Soundness on the official JSON-Schema-Test-Suite (draft 2020-12): each schema is compiled;
// each test instance is fed token by token. A valid instance must be accepted, an invalid one
// rejected. Results are compared with tests/grammar/json_schema_suite_baseline.txt: the test
// fails when any result gets worse or any invalid instance is accepted.
// DEEPINFER_UPDATE_BASELINE=1 rewrites the baseline.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/json_schema/instance_text.h"
#include "deepinfer/tools/bench_mask.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {
using namespace deepinfer::tools;  // the mask bench runner walks the instances

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

bool data_required() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

std::string read_file(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(JsonSchemaTestSuite, NoRegressionsAndNothingWronglyAccepted) {
  std::string dir = testing::data_dir() + "/json-schema-test-suite/tests/draft2020-12";
  if (!fs::exists(dir)) {
    if (data_required()) FAIL() << "missing " << dir;
    GTEST_SKIP() << "JSON-Schema-Test-Suite not found at " << dir;
  }
  auto vocab = testing::test_vocabulary();
  GreedyTokenizer tok(*vocab);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());

  std::map<std::string, std::string> results;  // "file|group|test" -> result
  std::map<std::string, int> counts;
  for (const auto& f : files) {
    Json groups = Json::parse(read_file(dir + "/" + f));
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const Json& group = groups[gi];
      GrammarSpec spec{GrammarSpec::kJsonSchema, group["schema"].dump(), {}};
      auto compiled = compile_grammar(spec, vocab);
      for (size_t ti = 0; ti < group["tests"].size(); ++ti) {
        const Json& t = group["tests"][ti];
        bool valid = t["valid"].get<bool>();
        std::string result;
        if (!compiled.is_ok() && compiled.status().message().find("no JSON value satisfies") != std::string::npos) {
          // Refused as unsatisfiable: the request is rejected, so no instance is produced.
          result = valid ? "wrongly_rejected" : "ok";
        } else if (!compiled.is_ok()) {
          result = "refused";
        } else {
          GrammarMatcher m(*compiled);
          std::vector<int32_t> ids = tok.encode(instance_text(group["schema"], t["data"]));
          ids.push_back(vocab->eos_ids.at(0));
          bool ok = true;
          for (int32_t id : ids)
            if (!(ok = m.accept_token(id))) break;
          ok = ok && m.is_terminated();
          result = ok == valid ? "ok" : (valid ? "wrongly_rejected" : "WRONGLY_ACCEPTED");
        }
        results[fmt::format("{}|{}|{}", f, gi, ti)] = result;
        counts[result]++;
        EXPECT_NE(result, "WRONGLY_ACCEPTED")
            << f << " / " << group["description"] << " / " << t["description"] << ": "
            << t["data"].dump();
      }
    }
  }
  std::string summary;
  for (const auto& [r, n] : counts) summary += fmt::format("{}={} ", r, n);
  std::printf("JSON-Schema-Test-Suite: %s\n", summary.c_str());

  std::string baseline_path = std::string(DEEPINFER_SOURCE_DIR) + "/tests/grammar/json_schema_suite_baseline.txt";
  const char* update = std::getenv("DEEPINFER_UPDATE_BASELINE");
  if (update && std::string(update) == "1") {
    std::ofstream out(baseline_path);
    out << "# file|group|test result  (ok, refused, wrongly_rejected); regenerate with "
           "DEEPINFER_UPDATE_BASELINE=1\n";
    for (const auto& [k, r] : results) out << k << " " << r << "\n";
    return;
  }
  std::ifstream in(baseline_path);
  ASSERT_TRUE(in.good()) << "missing baseline " << baseline_path;
  std::string line;
  int regressions = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.rfind(' ');
    std::string key = line.substr(0, sp), was = line.substr(sp + 1);
    auto it = results.find(key);
    if (it == results.end()) continue;  // the suite changed; new tests are not regressions
    if (was == "ok" && it->second != "ok") {
      ++regressions;
      ADD_FAILURE() << "regression: " << key << " was ok, now " << it->second;
    }
  }
  EXPECT_EQ(regressions, 0);
}

// Samples of JSONSchemaBench (../shared/data/jsonschemabench): skipped when the data is
// absent, a failure under CI=true.
class JsonSchemaBenchSample : public ::testing::Test {
 protected:
  void SetUp() override {
    opts.dir = testing::data_dir() + "/jsonschemabench";
    if (fs::exists(opts.dir)) return;
    if (data_required()) FAIL() << "missing " << opts.dir;
    GTEST_SKIP() << "JSONSchemaBench not found at " << opts.dir;
  }
  MaskBenchOptions opts;
};

TEST_F(JsonSchemaBenchSample, DeterministicSampleIsSound) {
  opts.stride = 20;  // ~240 schemas across all subsets, fixed by file-name order
  // A small precompute budget keeps this test fast and exercises both precomputed and lazily
  // classified contexts (the mask/accept agreement must hold for both).
  opts.limits.precompute_seconds = 0.02;
  auto r = run_mask_benchmark(testing::test_vocabulary(), opts);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::printf("%s", r->report().c_str());
  EXPECT_EQ(r->total.wrongly_accepted, 0);
  EXPECT_EQ(r->total.mask_mismatches, 0);
  EXPECT_GT(r->total.compiled, r->total.schemas / 2);
}

TEST_F(JsonSchemaBenchSample, WithoutPrecomputeEveryContextIsClassifiedByAMask) {
  // `bench --mode mask --grammar-precompute none`: masks alone classify every context (key-set
  // scans and single contexts), and must agree with the matcher as precomputed ones do.
  opts.stride = 100;
  opts.precompute = MaskBenchPrecompute::kNone;
  auto r = run_mask_benchmark(testing::test_vocabulary(), opts);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->contexts_precomputed, 0u);
  EXPECT_GT(r->contexts_lazy, 0u);
  EXPECT_GT(r->lazy_mask_us.n, 0u);
  EXPECT_EQ(r->total.wrongly_accepted, 0);
  EXPECT_EQ(r->total.mask_mismatches, 0);
  EXPECT_NE(r->report().find("no precompute:"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::structured

namespace deepinfer::structured {
namespace {
using namespace deepinfer::tools;  // the mask bench runner walks the instances

// The full 4,770-schema run (minutes): DEEPINFER_GRAMMAR_FULL_BENCH=1 test_grammar
// --gtest_filter=JsonSchemaBench.Full (DEEPINFER_GRAMMAR_BENCH_STRIDE=k samples every k-th). The CLI's `bench --mode mask` calls the same function.
TEST(JsonSchemaBench, Full) {
  const char* full = std::getenv("DEEPINFER_GRAMMAR_FULL_BENCH");
  if (!full || std::string(full) != "1") GTEST_SKIP() << "set DEEPINFER_GRAMMAR_FULL_BENCH=1";
  MaskBenchOptions opts;
  opts.dir = testing::data_dir() + "/jsonschemabench";
  if (const char* stride = std::getenv("DEEPINFER_GRAMMAR_BENCH_STRIDE")) opts.stride = std::atoi(stride);
  // The context precompute budget per grammar (default GrammarLimits: 1 s); the counts do not
  // depend on it, only the compile/mask times do.
  if (const char* pre = std::getenv("DEEPINFER_GRAMMAR_PRECOMPUTE_SECONDS")) opts.limits.precompute_seconds = std::atof(pre);
  // Classify every context before walking (compile time then includes it): =1.
  const char* pf = std::getenv("DEEPINFER_GRAMMAR_BENCH_PRECOMPUTE_FIRST");
  if (pf && std::string(pf) == "1") opts.precompute = MaskBenchPrecompute::kFirst;
  // A simulated forward pass of this many ms before each mask of a valid instance.
  if (const char* st = std::getenv("DEEPINFER_GRAMMAR_BENCH_STEP_MS")) opts.step_ms = std::atof(st);
  // Refusal tally without the walks (seconds): DEEPINFER_GRAMMAR_BENCH_COMPILE_ONLY=1.
  if (const char* co = std::getenv("DEEPINFER_GRAMMAR_BENCH_COMPILE_ONLY")) opts.compile_only = std::string(co) == "1";
  auto r = run_mask_benchmark(testing::test_vocabulary(), opts);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::printf("%s", r->report().c_str());
  for (const auto& [reason, n] : r->refusal_reasons)
    if (n >= 3) std::printf("refused %4d  %s\n", n, reason.c_str());
  EXPECT_EQ(r->total.wrongly_accepted, 0);
}

}  // namespace
}  // namespace deepinfer::structured
