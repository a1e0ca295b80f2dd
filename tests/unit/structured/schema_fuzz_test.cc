// A bounded random-mutation fuzz loop over JSON Schema documents (issue 31): seeds from
// JSONSchemaBench plus hostile ones, mutated by wrapping, deepening, cross-linking with $ref,
// and keyword swaps, then compiled. A crash or hang fails the run; a schema that compiles must
// never lead the matcher into a dead end.
//
// Regular test runs fuzz for a few seconds. The long run (issue 31 asks for >= 10 minutes):
//   DEEPINFER_SCHEMA_FUZZ_SECONDS=600 build/bin/test_grammar --gtest_filter='SchemaFuzz.*'
// DEEPINFER_SCHEMA_FUZZ_SEED picks the seed (printed at the start, with every failure).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>

#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/json_schema/compiler.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

double env_double(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v ? std::atof(v) : fallback;
}

std::vector<Json> seed_schemas() {
  std::vector<Json> seeds;
  for (const char* s :
       {R"({"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]+$"},"b":{"type":"integer","minimum":3}},"required":["a"]})",
        R"({"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"})",
        R"({"anyOf":[{"type":"array","items":{"type":"number"},"minItems":2},{"type":"null"}],"oneOf":[{"maxItems":3},{"type":"null"}]})",
        R"({"type":"string","format":"date-time","maxLength":40})",
        R"({"enum":[1,"a",[1,[2]],{"x":null}],"not":{"const":1}})",
        R"({"type":"object","patternProperties":{"^x":{"type":"integer"}},"additionalProperties":false,"minProperties":1})",
        R"({"allOf":[{"type":"integer","multipleOf":3},{"not":{"multipleOf":2}}],"maximum":100})",
        R"({"if":{"properties":{"k":{"const":1}}},"then":{"required":["v"]},"else":{"required":["w"]}})",
        R"({"type":"object","dependencies":{"a":["b"],"c":{"required":["d"]}},"properties":{"a":{},"b":{},"c":{},"d":{}}})",
        R"({"type":"array","prefixItems":[{"type":"string"}],"items":false,"uniqueItems":true})", R"(true)"})
    seeds.push_back(Json::parse(s));
  const std::string dir = testing::data_dir() + "/jsonschemabench";
  if (!fs::exists(dir)) return seeds;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i < files.size(); i += 25) {
    std::ifstream in(files[i]);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      Json doc = Json::parse(ss.str());
      if (doc.contains("schema")) seeds.push_back(doc["schema"]);
    } catch (const std::exception&) {
    }
  }
  return seeds;
}

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  void mutate(Json& root) {
    const int n = 1 + pick(4);
    for (int i = 0; i < n; ++i) {
      try {
        mutate_once(root);
      } catch (const std::exception&) {
        // A mutation that does not fit the node (a keyword on a non-object): skip it.
      }
    }
  }

 private:
  size_t pick(size_t n) { return n ? rng_() % n : 0; }

  // Every node with its JSON pointer, up to a bound.
  void nodes(Json& root, std::vector<std::pair<Json*, std::string>>& out) {
    std::vector<std::pair<Json*, std::string>> stack = {{&root, ""}};
    while (!stack.empty() && out.size() < 4000) {
      auto [v, p] = stack.back();
      stack.pop_back();
      out.push_back({v, p});
      if (v->is_object()) {
        for (auto& [k, x] : v->items()) stack.push_back({&x, p + "/" + k});
      } else if (v->is_array()) {
        for (size_t i = 0; i < v->size(); ++i) stack.push_back({&(*v)[i], p + "/" + std::to_string(i)});
      }
    }
  }

  Json random_value(int depth = 0) {
    switch (pick(depth > 2 ? 6 : 9)) {
      case 0: return static_cast<int64_t>(pick(20)) - 5;
      case 1: return std::vector<double>{0.5, 2.5, 0.3, 1e300, -1e-9, 0.25, 3.0}[pick(7)];
      case 2: return std::vector<std::string>{"integer", "string", "object", "array", "number", "null", "boolean"}[pick(7)];
      case 3: return pick(2) == 0;
      case 4:
        return std::vector<std::string>{"^a+$", "[^\\s\\S]", "a^b", "(a|b)*c{2,5}", "(?=x)y", "\\p{L}",
                                        "((((a))))", "[\\u0000-\\uffff]{3}", "date", "duration", "uri-template",
                                        "#", "#/$defs/x", "#/properties"}[pick(14)];
      case 5: return nullptr;
      case 6: return Json::array({random_value(depth + 1), random_value(depth + 1)});
      case 7: return Json{{random_keyword(), random_value(depth + 1)}};
      default: return Json::object();
    }
  }

  std::string random_keyword() {
    static const std::vector<std::string> kw = {
        "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
        "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "multipleOf", "anyOf", "oneOf", "allOf", "not", "if",
        "then", "else", "$ref", "$defs", "contains", "uniqueItems", "minProperties", "maxProperties",
        "dependencies", "dependentRequired", "propertyNames", "description", "default"};
    return kw[pick(kw.size())];
  }

  void mutate_once(Json& root) {
    std::vector<std::pair<Json*, std::string>> all;
    nodes(root, all);
    auto [node, ptr] = all[pick(all.size())];
    const std::string other = all[pick(all.size())].second;
    switch (pick(8)) {
      case 0: {  // wrap in a combinator
        Json x = *node;
        static const char* kWraps[] = {"not", "anyOf", "oneOf", "allOf", "items", "additionalProperties", "if"};
        std::string w = kWraps[pick(7)];
        if (w == "anyOf" || w == "oneOf" || w == "allOf")
          *node = Json{{w, Json::array({x, random_value()})}};
        else if (w == "if")
          *node = Json{{"if", x}, {"then", random_value()}};
        else
          *node = Json{{w, x}};
        break;
      }
      case 1: {  // deepen, sometimes past the depth limit
        const int levels = pick(3) == 0 ? 200 + static_cast<int>(pick(400)) : 1 + static_cast<int>(pick(30));
        for (int i = 0; i < levels; ++i) *node = pick(2) ? Json::array({*node}) : Json{{"not", *node}};
        break;
      }
      case 2:  // a $ref to anywhere (cycles included)
        if (node->is_object()) (*node)["$ref"] = "#" + other;
        break;
      case 3:  // set a keyword
        if (node->is_object()) (*node)[random_keyword()] = random_value();
        break;
      case 4:  // drop a keyword
        if (node->is_object() && !node->empty()) node->erase(std::next(node->begin(), static_cast<long>(pick(node->size()))));
        break;
      case 5: {  // copy another subtree here
        Json copy;
        try {
          copy = root.at(Json::json_pointer(other));
        } catch (const std::exception&) {
          break;  // a key with '/' or '~' in it: the pointer is not escaped
        }
        if (copy.dump().size() < 20000) *node = std::move(copy);
        break;
      }
      case 6:
        *node = random_value();
        break;
      default: {  // a property that requires itself
        if (!node->is_object()) break;
        (*node)["properties"]["p"] = {{"$ref", "#" + ptr + "/properties/p"}};
        if (pick(2)) (*node)["required"] = Json::array({"p"});
        break;
      }
    }
  }

  std::mt19937 rng_;
};

TEST(SchemaFuzz, RandomMutationsNeverCrashOrDeadEnd) {
  const double seconds = env_double("DEEPINFER_SCHEMA_FUZZ_SECONDS", 3);
  const auto seed = static_cast<uint32_t>(env_double("DEEPINFER_SCHEMA_FUZZ_SEED", 31));
  std::printf("schema fuzz: seed %u, %.0f s\n", seed, seconds);
  const std::vector<Json> seeds = seed_schemas();
  Mutator mutator(seed);
  std::mt19937 rng(seed ^ 0x9e3779b9u);
  GrammarLimits limits;
  limits.max_compile_seconds = 2;
  limits.max_elements = 400'000;
  limits.precompute_seconds = 0;
  auto vocab = testing::synthetic_vocabulary();
  std::vector<uint32_t> mask(vocab->mask_words());
  const auto start = std::chrono::steady_clock::now();
  std::map<std::string, int> outcomes;  // ok / error code
  int iterations = 0, walked = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    Json doc = seeds[rng() % seeds.size()];
    mutator.mutate(doc);
    const std::string text = doc.dump();
    ++iterations;
    const bool walk = rng() % 4 == 0;
    GrammarSpec spec{GrammarSpec::kJsonSchema, text, {}};
    spec.opts.any_whitespace = rng() % 2;
    // Bad input is a Status, never an exception (a synchronous caller would not expect one).
    CompileResult g = Status(StatusCode::kInternal, "unset");
    try {
      if (!walk) {
        auto front = compile_json_schema(text, spec.opts, limits);
        outcomes[front.is_ok() ? "ok" : std::to_string(static_cast<int>(front.status().code()))]++;
        continue;
      }
      // Compiled over a vocabulary: random walks through the masks never meet a dead end.
      g = compile_grammar(spec, vocab, limits, CompiledGrammar::Precompute::kOnFirstUse);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "exception " << e.what() << ", seed " << seed << ", schema: " << text.substr(0, 2000);
      continue;
    }
    outcomes[g.is_ok() ? "ok" : std::to_string(static_cast<int>(g.status().code()))]++;
    if (!g.is_ok()) continue;
    ++walked;
    GrammarMatcher m(*g);
    for (int step = 0; step < 60 && !m.is_terminated(); ++step) {
      m.fill_next_token_bitmask(mask.data());
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->size(); ++id)
        if ((mask[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
      ASSERT_FALSE(allowed.empty()) << "dead end after " << step << " tokens, seed " << seed
                                    << ", schema: " << text.substr(0, 2000);
      ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()])) << text.substr(0, 2000);
    }
  }
  std::printf("schema fuzz: %d schemas (%d walked), outcomes:", iterations, walked);
  for (const auto& [k, n] : outcomes) std::printf(" %s=%d", k.c_str(), n);
  std::printf("\n");
  EXPECT_GT(iterations, 0);
}

}  // namespace
}  // namespace deepinfer::structured
