// tokenizer.json loading vs the `tokenizers` library on two tiny trained tokenizers (fixtures
// from make_tokenizer_fixture.py), plus pre-tokenizer and BPE details that need no model.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "deepinfer/recipe/byte_level.h"
#include "deepinfer/recipe/pretokenizer_regex.h"
#include "test_model.h"

namespace deepinfer::recipe {
namespace {

std::string fixtures() { return testing::source_dir() + "/tests/reference/fixtures/"; }

class TinyHf : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyHf, MatchesTokenizersLibrary) {
  auto tok = Tokenizer::from_hf_dir(fixtures() + "tokenizer_tiny_" + GetParam());
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  auto lines = testing::read_jsonl(fixtures() + "tokenizer_tiny_" + GetParam() + ".jsonl");
  ASSERT_GT(lines.size(), 500u);
  int failures = 0;
  for (const auto& line : lines) {
    const std::string text = line["text"];
    const auto want = line["ids"].get<std::vector<int32_t>>();
    const auto want_special =
        line.contains("ids_special") ? line["ids_special"].get<std::vector<int32_t>>() : want;
    auto got = (*tok)->encode(text);
    auto got_special = (*tok)->encode(text, true);
    if ((got != want || got_special != want_special) && ++failures <= 5) {
      ADD_FAILURE() << nlohmann::json(text).dump() << "\n got " << nlohmann::json(got).dump()
                    << "\n want " << nlohmann::json(want).dump() << "\n special got "
                    << nlohmann::json(got_special).dump() << "\n special want "
                    << nlohmann::json(want_special).dump();
    }
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TinyHf, ::testing::Values("llama3", "prefix"));

TEST(TinyHfConfig, SpecialsAndConfig) {
  auto tok = Tokenizer::from_hf_dir(fixtures() + "tokenizer_tiny_llama3");
  ASSERT_TRUE(tok.is_ok());
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.bos_id(), *t.special_token_id("<|begin_of_text|>"));
  EXPECT_EQ(t.eos_id(), *t.special_token_id("<|eot_id|>"));
  EXPECT_TRUE(t.add_bos());
  EXPECT_FALSE(t.chat_template().empty());
  // "<think>" is a non-special added token: always matched, never "special".
  auto ids = t.encode("a<think>b");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(t.token_bytes(ids[1]), "<think>");
  EXPECT_FALSE(t.is_special(ids[1]));
  EXPECT_EQ(t.decode(ids), "a<think>b");
}

TEST(TinyHfConfig, BadDirectoriesGiveClearErrors) {
  auto missing = Tokenizer::from_hf_dir("/nonexistent/dir");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("tokenizer.json"), std::string::npos);

  auto dir = std::filesystem::temp_directory_path() / ("di_tok_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& body) {
    std::FILE* f = std::fopen((dir / "tokenizer.json").c_str(), "w");
    std::fputs(body.c_str(), f);
    std::fclose(f);
    return Tokenizer::from_hf_dir(dir.string());
  };
  auto not_json = write("{not json");
  EXPECT_EQ(not_json.status().code(), StatusCode::kCorrupt);
  auto wordpiece = write(R"({"model": {"type": "WordPiece", "vocab": {}}, "decoder": {"type": "ByteLevel"}})");
  EXPECT_EQ(wordpiece.status().code(), StatusCode::kUnsupported);
  auto metaspace = write(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "pre_tokenizer": {"type": "Metaspace"}, "decoder": {"type": "ByteLevel"}})");
  EXPECT_EQ(metaspace.status().code(), StatusCode::kUnsupported);
  auto bad_merge = write(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]},
      "decoder": {"type": "ByteLevel"}})");
  EXPECT_EQ(bad_merge.status().code(), StatusCode::kCorrupt);
  auto bad_type = write(R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}, "decoder": {"type": "ByteLevel"}})");
  EXPECT_FALSE(bad_type.is_ok());
  std::filesystem::remove_all(dir);
}

std::vector<std::string> split(const PreTokenizer& p, std::string_view text) {
  std::deque<std::string> arena;
  std::vector<std::string_view> pieces;
  p.split(text, &arena, &pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(PreTokenizer, Gpt2RegexAndUnicodeWhitespace) {
  auto p = std::move(PreTokenizer::from_gguf_pre("gpt2")).value();
  EXPECT_EQ(split(p, "Hello  world's 123!!"),
            (std::vector<std::string>{"Hello", " ", " world", "'s", " 123", "!!"}));
  // U+0085 counts as whitespace (as in HF's Oniguruma), U+200B does not.
  EXPECT_EQ(split(p, "a\xc2\x85\xc2\x85" "b"), (std::vector<std::string>{"a", "\xc2\x85", "\xc2\x85", "b"}));
  EXPECT_EQ(split(p, "a\xe2\x80\x8b\xe2\x80\x8b" "b"), (std::vector<std::string>{"a", "\xe2\x80\x8b\xe2\x80\x8b", "b"}));
  // Invalid UTF-8 never matches and comes out as its own piece.
  EXPECT_EQ(split(p, "ab\xff" "cd"), (std::vector<std::string>{"ab", "\xff", "cd"}));
  EXPECT_EQ(widen_whitespace_classes(R"(\s+(?!\S)|[^\s\p{L}])"),
            R"([\s\x{85}]+(?![^\s\x{85}])|[^\s\x{85}\p{L}])");
}

TEST(PreTokenizer, HfStepsAndBehaviours) {
  auto seq = PreTokenizer::from_hf_json(nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"String": "-"}, "behavior": "Removed", "invert": false},
      {"type": "Digits", "individual_digits": true},
      {"type": "ByteLevel", "add_prefix_space": true, "use_regex": false}]})"));
  ASSERT_TRUE(seq.is_ok()) << seq.status().message();
  EXPECT_EQ(split(*seq, "ab-c12"), (std::vector<std::string>{" ab", " c", " 1", " 2"}));
  auto contiguous = PreTokenizer::from_hf_json(nlohmann::json::parse(
      R"({"type": "Split", "pattern": {"Regex": "x"}, "behavior": "Contiguous"})"));
  ASSERT_TRUE(contiguous.is_ok());
  EXPECT_EQ(split(*contiguous, "axxbx"), (std::vector<std::string>{"a", "xx", "b", "x"}));
  auto next = PreTokenizer::from_hf_json(nlohmann::json::parse(
      R"({"type": "Split", "pattern": {"String": ","}, "behavior": "MergedWithNext"})"));
  EXPECT_EQ(split(*next, "a,b,c"), (std::vector<std::string>{"a", ",b", ",c"}));
  EXPECT_EQ(PreTokenizer::from_gguf_pre("no-such-pre").status().code(), StatusCode::kUnsupported);
  EXPECT_FALSE(PreTokenizer::from_regex("(unclosed").is_ok());
  for (const char* name : {"smollm", "llama-bpe", "qwen2", "deepseek-v3", "deepseek-llm", "default"})
    EXPECT_TRUE(PreTokenizer::from_gguf_pre(name).is_ok()) << name;
  auto ds = std::move(PreTokenizer::from_gguf_pre("deepseek-v3")).value();
  EXPECT_EQ(split(ds, "12345 你好ab"), (std::vector<std::string>{"123", "45", " ", "你好", "ab"}));
}

TEST(Bpe, MergesByRankLeftmostFirst) {
  // Vocabulary: bytes a, b plus "ab", "aa", "aab"; merges: "a a" (rank 0), "a b" (1), "aa b" (2).
  std::vector<std::string> vocab{"a", "b", "ab", "aa", "aab"};
  std::vector<std::pair<std::string, std::string>> merges{{"a", "a"}, {"a", "b"}, {"aa", "b"}};
  auto bpe = BpeModel::build(vocab, std::vector<bool>(vocab.size(), true), merges, false);
  ASSERT_TRUE(bpe.is_ok()) << bpe.status().message();
  auto enc = [&](std::string_view w) {
    std::vector<int32_t> out;
    bpe->encode_word(w, &out);
    return out;
  };
  EXPECT_EQ(enc("aaa"), (std::vector<int32_t>{3, 0}));   // leftmost "aa" first
  EXPECT_EQ(enc("aab"), (std::vector<int32_t>{4}));      // aa+b after a+a
  EXPECT_EQ(enc("aaab"), (std::vector<int32_t>{3, 2}));  // aa, ab
  EXPECT_EQ(enc("bc"), (std::vector<int32_t>{1}));       // 'c' has no token: dropped
  EXPECT_EQ(enc("aab"), (std::vector<int32_t>{4}));      // cached path agrees
}

TEST(ByteLevel, AlphabetRoundTripsAllBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  EXPECT_TRUE(byte_level_decode(byte_level_encode(all), &back));
  EXPECT_EQ(back, all);
  EXPECT_EQ(byte_level_encode(" \n"), "\xc4\xa0\xc4\x8a");  // "Ġ", "Ċ"
  EXPECT_EQ(utf8_make_valid("a\xe2\x82" "b\xf0\x9f\x98\x80\xff"), "a\xef\xbf\xbd" "b\xf0\x9f\x98\x80\xef\xbf\xbd");
}

}  // namespace
}  // namespace deepinfer::recipe
