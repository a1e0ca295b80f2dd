// Output parsing: DeepSeek V3 / V3.1 / R1 reasoning and tool calls, Hermes <tool_call>, Llama 3.1
// JSON; malformed calls stay content; every split of the text into deltas gives the same result
// and never leaks part of a marker into content.
#include <gtest/gtest.h>

#include <random>

#include "deepinfer/model/model_config.h"
#include "deepinfer/recipe/output_parser.h"

namespace deepinfer::recipe {
namespace {

OutputParserOptions deepseek(bool starts_in_reasoning = false) {
  return {ToolCallFormat::kDeepseek, true, starts_in_reasoning};
}

// Streams `text` in pieces cut at the byte offsets in `cuts`. Streaming never takes text
// back: after every delta, the content and reasoning so far are prefixes of the whole-text
// result (so no part of a marker that later turns out to open a call is ever shown).
ParsedOutput streamed(const OutputParserOptions& o, const std::string& text,
                      const std::vector<size_t>& cuts, const ParsedOutput& whole) {
  OutputParser p(o);
  ParsedOutput joined;
  size_t prev = 0;
  auto take = [&](const OutputDelta& d) {
    joined.content += d.content;
    joined.reasoning_content += d.reasoning_content;
    for (const auto& c : d.tool_calls) joined.tool_calls.push_back(c);
    EXPECT_TRUE(whole.content.starts_with(joined.content)) << joined.content;
    EXPECT_TRUE(whole.reasoning_content.starts_with(joined.reasoning_content));
  };
  for (size_t c : cuts) {
    if (c <= prev || c >= text.size()) continue;
    take(p.push(std::string_view(text).substr(prev, c - prev)));
    prev = c;
  }
  take(p.push(std::string_view(text).substr(prev)));
  take(p.finish());
  EXPECT_EQ(joined.content, p.result().content);
  EXPECT_EQ(joined.reasoning_content, p.result().reasoning_content);
  EXPECT_EQ(joined.tool_calls.size(), p.result().tool_calls.size());
  return p.result();
}

// Whole, byte by byte, and 50 random splits must all agree (ids aside).
ParsedOutput parse_all_ways(const OutputParserOptions& o, const std::string& text) {
  ParsedOutput whole = OutputParser::parse(o, text);
  std::vector<size_t> every(text.size());
  for (size_t i = 0; i < text.size(); ++i) every[i] = i;
  std::mt19937 rng(7);
  std::vector<std::vector<size_t>> splits = {every};
  for (int k = 0; k < 50; ++k) {
    std::vector<size_t> cuts;
    for (size_t i = 0; i < text.size(); ++i)
      if (rng() % 5 == 0) cuts.push_back(i);
    splits.push_back(cuts);
  }
  for (const auto& cuts : splits) {
    ParsedOutput s = streamed(o, text, cuts, whole);
    EXPECT_EQ(s.content, whole.content) << text;
    EXPECT_EQ(s.reasoning_content, whole.reasoning_content) << text;
    EXPECT_EQ(s.tool_calls.size(), whole.tool_calls.size()) << text;
    for (size_t i = 0; i < std::min(s.tool_calls.size(), whole.tool_calls.size()); ++i) {
      EXPECT_EQ(s.tool_calls[i].name, whole.tool_calls[i].name);
      EXPECT_EQ(s.tool_calls[i].arguments_json, whole.tool_calls[i].arguments_json);
    }
  }
  return whole;
}

TEST(OutputParser, DeepseekV31ThinkingAndCalls) {
  const std::string text =
      "Let me look this up.\n</think>\n\nChecking the weather.\n\n<｜tool▁calls▁begin｜>"
      "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜>"
      "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"tz\": \"CET\"}<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>";
  auto r = parse_all_ways(deepseek(/*starts_in_reasoning=*/true), text);
  EXPECT_EQ(r.reasoning_content, "Let me look this up.");
  EXPECT_EQ(r.content, "Checking the weather.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments_json, "{\"city\": \"Paris\"}");
  EXPECT_EQ(r.tool_calls[1].name, "get_time");
  EXPECT_TRUE(r.tool_calls[0].id.starts_with("call_"));
  EXPECT_NE(r.tool_calls[0].id, r.tool_calls[1].id);
}

TEST(OutputParser, DeepseekV3FencedCalls) {
  const std::string text =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\": \"東京\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
      "noop\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  auto r = parse_all_ways(deepseek(), text);
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.reasoning_content, "");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments_json, "{\"city\": \"東京\"}");
  EXPECT_EQ(r.tool_calls[1].name, "noop");
  EXPECT_EQ(r.tool_calls[1].arguments_json, "{}");
}

TEST(OutputParser, DeepseekR1ReasoningOpenedByModel) {
  auto r = parse_all_ways(deepseek(), "<think>\nhmm 2+2\n</think>\n\n4 is the answer.\n");
  EXPECT_EQ(r.reasoning_content, "hmm 2+2");
  EXPECT_EQ(r.content, "4 is the answer.\n");
  // Out of tokens mid-thought: everything is reasoning, nothing is content.
  auto cut = parse_all_ways(deepseek(true), "still thinking about <b>it</b> and <thi");
  EXPECT_EQ(cut.reasoning_content, "still thinking about <b>it</b> and <thi");
  EXPECT_EQ(cut.content, "");
  // <think> after text is text.
  auto late = parse_all_ways(deepseek(), "Use <think> tags.");
  EXPECT_EQ(late.content, "Use <think> tags.");
}

TEST(OutputParser, DeepseekMalformedCallsStayContent) {
  // Arguments not JSON: the call's text comes back as content, the good call still parses.
  const std::string text =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{not json<｜tool▁call▁end｜>"
      "<｜tool▁call▁begin｜>g<｜tool▁sep｜>{\"x\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  auto r = parse_all_ways(deepseek(), text);
  EXPECT_EQ(r.content, "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{not json<｜tool▁call▁end｜>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "g");
  // Unterminated section at the end of generation: raw text, marker included.
  auto u = parse_all_ways(deepseek(), "ok <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\":");
  EXPECT_EQ(u.content, "ok<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\":");
  EXPECT_TRUE(u.tool_calls.empty());
  // No separator, no fence end, empty name: all content, no crash.
  for (const std::string bad :
       {"<｜tool▁call▁begin｜>nosep<｜tool▁call▁end｜>",
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n<｜tool▁call▁end｜>",
        "<｜tool▁call▁begin｜><｜tool▁sep｜>{}<｜tool▁call▁end｜>",
        "<｜tool▁call▁begin｜>a b<｜tool▁sep｜>[1]<｜tool▁call▁end｜>"}) {
    auto b = parse_all_ways(deepseek(), "<｜tool▁calls▁begin｜>" + bad + "<｜tool▁calls▁end｜>");
    EXPECT_TRUE(b.tool_calls.empty()) << bad;
    EXPECT_EQ(b.content, bad);
  }
}

TEST(OutputParser, ToolsOffLeavesMarkupAsContent) {
  OutputParserOptions o = deepseek();
  o.tools = ToolCallFormat::kNone;
  const std::string text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>";
  auto r = parse_all_ways(o, text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.tool_calls.empty());
}

TEST(OutputParser, HermesCalls) {
  OutputParserOptions o{ToolCallFormat::kHermes, true, false};
  const std::string text =
      "<think>\nneed weather\n</think>\n\nSure.\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Zürich\", \"days\": [1, 2]}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"noop\", \"arguments\": \"{\\\"a\\\": true}\"}\n</tool_call>";
  auto r = parse_all_ways(o, text);
  EXPECT_EQ(r.reasoning_content, "need weather");
  EXPECT_EQ(r.content, "Sure.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments_json, "{\"city\": \"Zürich\", \"days\": [1, 2]}");
  EXPECT_EQ(r.tool_calls[1].arguments_json, "{\"a\": true}");
  // Malformed body: the block stays content; text after it keeps streaming.
  auto bad = parse_all_ways(o, "A<tool_call>{\"name\": 3}</tool_call>B");
  EXPECT_EQ(bad.content, "A<tool_call>{\"name\": 3}</tool_call>B");
  EXPECT_TRUE(bad.tool_calls.empty());
  // Stopped before </tool_call> with a complete body: still a call.
  auto eos = parse_all_ways(o, "<tool_call>{\"name\": \"f\", \"arguments\": {}}");
  ASSERT_EQ(eos.tool_calls.size(), 1u);
  EXPECT_EQ(eos.content, "");
}

TEST(OutputParser, Llama3JsonCalls) {
  OutputParserOptions o{ToolCallFormat::kLlama3Json, false, false};
  auto r = parse_all_ways(o, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments_json, "{\"city\": \"Oslo\"}");
  EXPECT_EQ(r.content, "");
  auto two = parse_all_ways(o, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"s\": \"}{\"}}");
  ASSERT_EQ(two.tool_calls.size(), 2u);
  EXPECT_EQ(two.tool_calls[1].arguments_json, "{\"s\": \"}{\"}");
  // Text first, or JSON that is not a call: plain content, unchanged.
  EXPECT_EQ(parse_all_ways(o, "The JSON is {\"a\": 1}.").content, "The JSON is {\"a\": 1}.");
  EXPECT_EQ(parse_all_ways(o, "{\"a\": 1}").content, "{\"a\": 1}");
  EXPECT_EQ(parse_all_ways(o, "{\"name\": \"f\", \"parameters\": {").content,
            "{\"name\": \"f\", \"parameters\": {");
}

TEST(OutputParser, PlainTextPassesThrough) {
  for (ToolCallFormat f : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kDeepseek}) {
    const std::string text = "  Hello <b>world</b> <｜User｜> < tool_call > \n\n";
    auto r = parse_all_ways({f, false, false}, text);
    EXPECT_EQ(r.content, text);
  }
}

TEST(OutputParser, DeeplyNestedArgumentsAreRefusedNotRecursed) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto r = OutputParser::parse({ToolCallFormat::kHermes, false, false},
                               "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + deep + "}}</tool_call>");
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_FALSE(r.content.empty());
  EXPECT_EQ(json_nesting_depth("{\"a\": [1, {\"b\": \"[[[\"}]}"), 3u);
}

// Random soup of markers, marker fragments, JSON pieces and text: no crash, and the streaming
// invariants of parse_all_ways hold for every format.
TEST(OutputParser, RandomSoupStreamsConsistently) {
  const std::vector<std::string> pieces = {
      "<think>", "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
      "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "<tool_call>", "</tool_call>", "<|python_tag|>",
      "function", "get_weather", "\n```json\n", "```", "{\"name\": \"f\", \"arguments\": {}}",
      "{\"city\": \"Paris\"}", "{", "}", "\"", "\\", ";", " ", "\n\n", "hello", "你好", "<", "｜",
      "<｜tool", "</thi", "<tool_", "\xe2\x96"};
  std::mt19937 rng(11);
  for (int iter = 0; iter < 150; ++iter) {
    std::string text;
    const int n = 1 + rng() % 12;
    for (int k = 0; k < n; ++k) text += pieces[rng() % pieces.size()];
    for (ToolCallFormat f : {ToolCallFormat::kNone, ToolCallFormat::kDeepseek, ToolCallFormat::kHermes,
                             ToolCallFormat::kLlama3Json}) {
      OutputParserOptions o{f, (iter & 1) != 0, (iter & 2) != 0};
      ParsedOutput whole = OutputParser::parse(o, text);
      std::vector<size_t> cuts;
      for (size_t i = 0; i < text.size(); ++i)
        if (rng() % 3 == 0) cuts.push_back(i);
      ParsedOutput s = streamed(o, text, cuts, whole);
      EXPECT_EQ(s.content, whole.content) << text;
      EXPECT_EQ(s.reasoning_content, whole.reasoning_content) << text;
      EXPECT_EQ(s.tool_calls.size(), whole.tool_calls.size()) << text;
    }
  }
}

TEST(OutputParser, SelectionFromModel) {
  model::ModelConfig ds;
  ds.architecture = "deepseek_v3";
  auto o = make_output_parser(ds, "", /*tools=*/true, /*thinking=*/false).options();
  EXPECT_EQ(o.tools, ToolCallFormat::kDeepseek);
  EXPECT_TRUE(o.reasoning_tags);
  EXPECT_FALSE(o.starts_in_reasoning);
  const std::string v31 = "{% if not thinking is defined %}<｜User｜><｜Assistant｜></think>";
  EXPECT_TRUE(output_parser_options_for("deepseek_v3", v31, true, true).starts_in_reasoning);
  EXPECT_FALSE(output_parser_options_for("deepseek_v3", "<｜User｜>x<｜Assistant｜>", true, true)
                   .starts_in_reasoning);  // V3 has no thinking mode
  EXPECT_EQ(output_parser_options_for("deepseek_v3", "", false, false).tools, ToolCallFormat::kNone);
  // A DeepSeek-architecture model with another template (Kimi K2) does not get DeepSeek parsing.
  EXPECT_EQ(output_parser_options_for("deepseek_v3", "<|im_start|><tool_call>", true, false).tools,
            ToolCallFormat::kHermes);
  auto q = output_parser_options_for("qwen2", "{{ '<tool_call>' }}<think></think>", true, false);
  EXPECT_EQ(q.tools, ToolCallFormat::kHermes);
  EXPECT_TRUE(q.reasoning_tags);
  EXPECT_EQ(output_parser_options_for("llama", "<|start_header_id|><|python_tag|>", true, false).tools,
            ToolCallFormat::kLlama3Json);
  EXPECT_EQ(output_parser_options_for("llama", "<|im_start|>", true, false).tools, ToolCallFormat::kHermes);
}

}  // namespace
}  // namespace deepinfer::recipe
