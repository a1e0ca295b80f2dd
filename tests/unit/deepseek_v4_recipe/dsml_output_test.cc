// DeepSeek-V4 replies: reasoning up to </think>, content, DSML tool calls -> structured calls
// with JSON arguments; malformed or truncated DSML stays content; every split of the reply into
// deltas gives the same result and never shows part of a marker as content. Calls written by
// the encoder parse back to the same calls (round trip).
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "deepinfer/recipe/deepseek_v4_chat.h"
#include "deepinfer/recipe/output_parser.h"

namespace deepinfer::recipe {
namespace {

// Whole, byte by byte and 40 random splits agree; streamed text only ever grows.
ParsedOutput parse_all_ways(const OutputParserOptions& o, const std::string& text) {
  const ParsedOutput whole = OutputParser::parse(o, text);
  std::mt19937 rng(11);
  for (int k = -1; k < 40; ++k) {
    OutputParser p(o);
    ParsedOutput joined;
    auto take = [&](const OutputDelta& d) {
      joined.content += d.content;
      joined.reasoning_content += d.reasoning_content;
      for (const auto& c : d.tool_calls) joined.tool_calls.push_back(c);
      EXPECT_TRUE(whole.content.starts_with(joined.content)) << joined.content;
      EXPECT_TRUE(whole.reasoning_content.starts_with(joined.reasoning_content)) << joined.reasoning_content;
    };
    size_t prev = 0;
    for (size_t i = 1; i < text.size(); ++i) {
      if (k >= 0 && rng() % 4 != 0) continue;  // k == -1: byte by byte
      take(p.push(std::string_view(text).substr(prev, i - prev)));
      prev = i;
    }
    take(p.push(std::string_view(text).substr(prev)));
    take(p.finish());
    EXPECT_EQ(joined.content, whole.content) << text;
    EXPECT_EQ(joined.reasoning_content, whole.reasoning_content) << text;
    EXPECT_EQ(joined.tool_calls.size(), whole.tool_calls.size()) << text;
    for (size_t i = 0; i < std::min(joined.tool_calls.size(), whole.tool_calls.size()); ++i) {
      EXPECT_EQ(joined.tool_calls[i].name, whole.tool_calls[i].name);
      EXPECT_EQ(joined.tool_calls[i].arguments_json, whole.tool_calls[i].arguments_json);
    }
  }
  return whole;
}

const std::string kCalls =
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"get_weather\">\n"
    "<｜DSML｜parameter name=\"city\" string=\"true\">Paris, \"FR\"</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"opts\" string=\"false\">{\"unit\": \"C\", \"hourly\": [1, 2.5, true, null]}"
    "</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"now\">\n\n</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>";

TEST(DeepseekV4Output, ThinkingContentAndCalls) {
  const std::string text = "The user wants weather.\nTwo calls.</think>Let me check.\n\n" + kCalls;
  auto r = parse_all_ways(deepseek_v4_output_parser_options(true, true), text);
  EXPECT_EQ(r.reasoning_content, "The user wants weather.\nTwo calls.");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(r.tool_calls[0].arguments_json),
            nlohmann::json::parse(R"({"city": "Paris, \"FR\"", "days": 3, "opts": {"unit": "C", "hourly": [1, 2.5, true, null]}})"));
  EXPECT_EQ(r.tool_calls[0].arguments_json,
            R"({"city": "Paris, \"FR\"", "days": 3, "opts": {"unit": "C", "hourly": [1, 2.5, true, null]}})");
  EXPECT_EQ(r.tool_calls[1].name, "now");
  EXPECT_EQ(r.tool_calls[1].arguments_json, "{}");
  EXPECT_TRUE(r.tool_calls[0].id.starts_with("call_"));
  EXPECT_NE(r.tool_calls[0].id, r.tool_calls[1].id);
}

TEST(DeepseekV4Output, ChatModeAndNoTools) {
  auto r = parse_all_ways(deepseek_v4_output_parser_options(true, false), "\n\n" + kCalls);
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.reasoning_content, "");
  EXPECT_EQ(r.tool_calls.size(), 2u);
  // Without tools offered, DSML is the model's text.
  r = parse_all_ways(deepseek_v4_output_parser_options(false, false), "Answer.\n\n" + kCalls);
  EXPECT_EQ(r.content, "Answer.\n\n" + kCalls);
  EXPECT_TRUE(r.tool_calls.empty());
  // Thinking mode without tools: reasoning split off.
  r = parse_all_ways(deepseek_v4_output_parser_options(false, true), "hmm</think>\n\nFour.");
  EXPECT_EQ(r.reasoning_content, "hmm");
  EXPECT_EQ(r.content, "Four.");
}

TEST(DeepseekV4Output, MalformedCallsStayContent) {
  const auto o = deepseek_v4_output_parser_options(true, false);
  const std::string cases[] = {
      // a parameter without its string attribute
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\">1</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
      // duplicate parameter names
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">1"
      "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"a\" string=\"true\">2</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
      // stray text inside the invoke, an empty name, a bad string flag
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\nrm -rf /\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"maybe\">1"
      "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
      // an unterminated parameter
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">1\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
  };
  for (const std::string& text : cases) {
    auto r = parse_all_ways(o, text);
    EXPECT_TRUE(r.tool_calls.empty()) << text;
    EXPECT_NE(r.content.find("<｜DSML｜invoke"), std::string::npos) << text;
  }
  // One bad call among good ones: the good ones still parse, the bad one is shown as text.
  auto r = parse_all_ways(o, "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"g\">\n</｜DSML｜invoke>\n"
                             "<｜DSML｜invoke oops>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "g");
  EXPECT_EQ(r.content, "<｜DSML｜invoke oops>\n</｜DSML｜invoke>");
  // A string="false" value that is not JSON is kept as a string.
  r = parse_all_ways(o, "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
                        "string=\"false\">not json</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments_json, R"({"a": "not json"})");
  // Deep nesting is not recursed into.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  r = OutputParser::parse(o, "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
                             "string=\"false\">" + deep + "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments_json.size(), deep.size() + 9);  // {"a": "..."}
}

TEST(DeepseekV4Output, TruncatedStreams) {
  const auto o = deepseek_v4_output_parser_options(true, true);
  const std::string full = "think</think>Sure.\n\n" + kCalls;
  // Cut anywhere: nothing crashes, the reasoning is the text read so far, and a cut inside the
  // block never yields a half-read call.
  const ParsedOutput whole = OutputParser::parse(o, full);
  for (size_t n = 0; n <= full.size(); ++n) {
    const ParsedOutput r = OutputParser::parse(o, full.substr(0, n));
    EXPECT_TRUE(full.starts_with(r.reasoning_content)) << n;
    EXPECT_LE(r.tool_calls.size(), 2u);
    for (const auto& c : r.tool_calls) EXPECT_FALSE(nlohmann::json::parse(c.arguments_json).is_discarded());
    if (!r.tool_calls.empty()) {
      EXPECT_EQ(r.tool_calls[0].arguments_json, whole.tool_calls[0].arguments_json);
    }
  }
  // A reply cut inside its first call shows the unfinished markup as content.
  const size_t cut = full.find("<｜DSML｜parameter name=\"days\"");
  const ParsedOutput r = OutputParser::parse(o, full.substr(0, cut));
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_TRUE(r.content.starts_with("Sure.<｜DSML｜tool_calls>")) << r.content;
}

TEST(DeepseekV4Output, HostileLookalikesInText) {
  const auto o = deepseek_v4_output_parser_options(true, false);
  // ASCII pipes, a missing '<', spaces inside the marker: not DSML.
  const std::string text =
      "Use <|DSML|tool_calls> or ｜DSML｜tool_calls> or < ｜DSML｜tool_calls> in docs; </think> is text too.";
  auto r = parse_all_ways(o, text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.tool_calls.empty());
}

// Calls written by the encoder (the assistant turn's DSML block) parse back to the same calls.
TEST(DeepseekV4Output, EncoderOutputRoundTrips) {
  const std::string calls =
      R"([{"id":"1","type":"function","function":{"name":"search","arguments":"{\"q\": \"多语言 <b>\", \"k\": 5, \"f\": {\"x\": [1.5, false]}, \"s\": \"\"}"}},)"
      R"({"id":"2","type":"function","function":{"name":"noop","arguments":"{}"}}])";
  ChatMessage a;
  a.role = "assistant";
  a.content = "Searching.";
  a.tool_calls_json = calls;
  auto text = render_deepseek_v4_chat({a}, {});
  ASSERT_TRUE(text.is_ok());
  const std::string bos = "<｜begin▁of▁sentence｜>", eos = "<｜end▁of▁sentence｜>";
  ASSERT_TRUE(text->text.starts_with(bos) && text->text.ends_with(eos));
  const std::string reply = text->text.substr(bos.size(), text->text.size() - bos.size() - eos.size());
  auto r = parse_all_ways(deepseek_v4_output_parser_options(true, false), reply);
  EXPECT_EQ(r.content, "Searching.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "search");
  EXPECT_EQ(r.tool_calls[0].arguments_json, R"({"q": "多语言 <b>", "k": 5, "f": {"x": [1.5, false]}, "s": ""})");
  EXPECT_EQ(r.tool_calls[1].name, "noop");
  EXPECT_EQ(r.tool_calls[1].arguments_json, "{}");
}

TEST(DeepseekV4Output, SelectedByArchitecture) {
  const OutputParserOptions o = output_parser_options_for("deepseek_v4", "", true, true);
  EXPECT_EQ(o.tools, ToolCallFormat::kDeepseekDsml);
  EXPECT_TRUE(o.starts_in_reasoning);
  EXPECT_EQ(output_parser_options_for("deepseek_v4", "", false, false).tools, ToolCallFormat::kNone);
  EXPECT_EQ(output_parser_options_for("deepseek_v3", "", true, false).tools, ToolCallFormat::kDeepseek);
}

}  // namespace
}  // namespace deepinfer::recipe
