// See grammar_test_util.h.
#include "grammar_test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/engine/grammar_vocabulary.h"
#include "deepinfer/model/format/gguf.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::structured::testing {

std::shared_ptr<const TokenVocabulary> synthetic_vocabulary() {
  auto v = std::make_shared<TokenVocabulary>();
  for (int b = 0; b < 256; ++b) v->token_bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s :
       {"{\"", "\":", "\",",  "\"}", "\": \"", "true", "false", "null",    "12",          "00",
        "ab",  "abc", "name", "\\n", "\\\"",   "\"\"", "[]",    "{}",      "],",          "},",
        ", ",  "  ",  "\n ",  "1.",  ".5",     "-1",   "e+",    "\u00e9t", "\xe2\x82\xac"})
    v->token_bytes.push_back(s);
  v->token_bytes.push_back("");  // EOS
  v->eos_ids.push_back(static_cast<int32_t>(v->token_bytes.size() - 1));
  v->is_special.assign(v->token_bytes.size(), false);
  v->is_special.back() = true;
  return v;
}

std::shared_ptr<const TokenVocabulary> test_vocabulary(bool* real) {
  static std::once_flag once;
  static std::shared_ptr<const TokenVocabulary> vocab;
  static bool is_real = false;
  std::call_once(once, [] {
    const char* home = std::getenv("DEEPINFER_HOME");
    std::string dir =
        home ? home
             : std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/deepinfer";
    std::string path = dir + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (std::filesystem::exists(path)) {
      auto gguf = format::GgufFile::open(path);
      if (gguf.is_ok()) {
        auto tok = recipe::Tokenizer::from_gguf(**gguf);
        if (tok.is_ok()) {
          vocab = std::make_shared<TokenVocabulary>(engine::vocabulary_from_tokenizer(**tok));
          is_real = true;
          return;
        }
      }
    }
    vocab = synthetic_vocabulary();
  });
  if (real) *real = is_real;
  return vocab;
}

std::vector<int32_t> greedy_tokenize(const TokenVocabulary& v, const std::string& text) {
  static std::mutex mu;
  static const TokenVocabulary* cached_for = nullptr;
  static std::unordered_map<std::string, int32_t> index;
  static size_t max_len = 1;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (cached_for != &v) {
      index.clear();
      max_len = 1;
      for (int32_t id = 0; id < v.size(); ++id) {
        if (v.token_bytes[id].empty() || (!v.is_special.empty() && v.is_special[id])) continue;
        index.emplace(v.token_bytes[id], id);
        max_len = std::max(max_len, v.token_bytes[id].size());
      }
      cached_for = &v;
    }
  }
  std::vector<int32_t> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = std::min(max_len, text.size() - i);
    for (; n > 0; --n) {
      auto it = index.find(text.substr(i, n));
      if (it != index.end()) {
        out.push_back(it->second);
        break;
      }
    }
    if (n == 0) return {};  // a byte with no token: cannot happen for byte-level vocabularies
    i += n;
  }
  return out;
}

bool walk_text(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text,
               bool* mask_mismatch) {
  const TokenVocabulary& v = g->vocab();
  GrammarMatcher m(g);
  std::vector<uint32_t> mask(v.mask_words());
  auto allowed = [&](int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1; };
  std::vector<int32_t> ids = greedy_tokenize(v, text);
  if (ids.empty() && !text.empty()) return false;
  ids.push_back(v.eos_ids.at(0));
  for (int32_t id : ids) {
    m.fill_next_token_bitmask(mask.data());
    bool ok = m.accept_token(id);
    if (ok != static_cast<bool>(allowed(id)) && mask_mismatch) *mask_mismatch = true;
    if (!ok) return false;
  }
  return m.is_terminated();
}

std::string data_dir() {
  const char* src = std::getenv("DEEPINFER_SOURCE_DIR");
  std::string root = src ? src : DEEPINFER_SOURCE_DIR;
  return root + "/../shared/data";
}

std::shared_ptr<const CompiledGrammar> compile(const std::string& schema, JsonSchemaOptions o) {
  auto r = compile_grammar({GrammarSpec::kJsonSchema, schema, o}, synthetic_vocabulary());
  EXPECT_TRUE(r.is_ok()) << schema << ": " << r.status().message();
  return r.is_ok() ? *r : nullptr;
}

std::shared_ptr<const CompiledGrammar> compile_unclassified(const GrammarSpec& spec) {
  GrammarLimits no_precompute;
  no_precompute.precompute_seconds = 0;
  auto r = compile_grammar(spec, test_vocabulary(), no_precompute);
  EXPECT_TRUE(r.is_ok()) << spec.source << ": " << r.status().message();
  return r.is_ok() ? *r : nullptr;
}

bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  if (!g) return false;
  bool mismatch = false;
  bool ok = walk_text(g, text, &mismatch);
  EXPECT_FALSE(mismatch) << "mask disagrees with accept_token on '" << text << "'";
  return ok;
}

void expect_refused(const std::string& schema, const std::string& keyword) {
  auto r = compile_grammar({GrammarSpec::kJsonSchema, schema, {}}, synthetic_vocabulary());
  ASSERT_FALSE(r.is_ok()) << schema;
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().message();
  EXPECT_NE(r.status().message().find(keyword), std::string::npos) << r.status().message();
}

SchemaUnderTest compile_schema(const std::string& schema) {
  auto r = compile_grammar({GrammarSpec::kJsonSchema, schema, {}}, synthetic_vocabulary());
  EXPECT_TRUE(r.is_ok()) << schema << ": " << r.status().message();
  return {nlohmann::ordered_json::parse(schema), r.is_ok() ? *r : nullptr};
}

Verdict validator_verdict(const SchemaUnderTest& c, const std::string& text, bool enforce_formats) {
  InstanceValidator v(c.schema, enforce_formats);
  return v.validate(c.schema, nlohmann::ordered_json::parse(text));
}

void expect_verdict(const SchemaUnderTest& c, const std::string& text, bool valid,
                    bool enforce_formats) {
  EXPECT_EQ(validator_verdict(c, text, enforce_formats),
            valid ? Verdict::kValid : Verdict::kInvalid)
      << text;
  EXPECT_EQ(accepts(c.g, text), valid) << text;
}

}  // namespace deepinfer::structured::testing
