// The API-neutral chat turn on a DeepSeek-V4 model (architecture "deepseek_v4"): the prompt is
// V4's encoding (thinking from the request's switch or reasoning effort, tools in DSML terms),
// and the reply splits into reasoning, content and tool calls, which each API then writes as
// reasoning_content / reasoning items / thinking blocks and its own tool calls.
#include <gtest/gtest.h>

#include "../deepseek_recipe/deepseek_tokenizer.h"
#include "deepinfer/recipe/deepseek_v4_chat.h"
#include "deepinfer/serve/api_error.h"
#include "deepinfer/serve/chat_prompt.h"

namespace deepinfer::serve {
namespace {

using recipe::ChatMessage;

ChatTurn weather_turn() {
  ChatTurn turn;
  turn.messages = {ChatMessage{"system", "Be brief."}, ChatMessage{"user", "Weather in Paris?"}};
  ToolSpec t;
  t.name = "get_weather";
  t.description = "Current weather.";
  t.parameters = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}};
  turn.tools.push_back(t);
  return turn;
}

std::vector<int32_t> expected(const recipe::Tokenizer& tok, const std::vector<ChatMessage>& m,
                              const recipe::DeepseekV4ChatOptions& o) {
  auto ids = recipe::encode_deepseek_v4_chat(tok, m, o);
  EXPECT_TRUE(ids.is_ok()) << ids.status().message();
  return ids.is_ok() ? *ids : std::vector<int32_t>{};
}

TEST(DeepseekV4Serve, PromptIsTheV4Encoding) {
  DI_REQUIRE_DEEPSEEK_TOKENIZER(tok);
  ChatTurn turn = weather_turn();
  turn.thinking = true;
  turn.thinking_param = "chat_template_kwargs.thinking";
  engine::GenerationRequest r;
  encode_chat_turn(*tok, "deepseek_v4", turn, r);
  recipe::DeepseekV4ChatOptions o;
  o.thinking = true;
  o.tools_json =
      R"([{"type":"function","function":{"name":"get_weather","description":"Current weather.",)"
      R"("parameters":{"properties":{"city":{"type":"string"}},"type":"object"}}}])";
  EXPECT_EQ(r.prompt_ids, expected(*tok, turn.messages, o));
  EXPECT_EQ(tok->decode(std::vector<int32_t>(r.prompt_ids.end() - 2, r.prompt_ids.end())), "<｜Assistant｜><think>");
  EXPECT_EQ(turn.parser.tools, recipe::ToolCallFormat::kDeepseekDsml);
  EXPECT_TRUE(turn.parser.starts_in_reasoning);
  // The same conversation on a V3 model keeps V3's encoding.
  ChatTurn v3 = weather_turn();
  engine::GenerationRequest r3;
  encode_chat_turn(*tok, "deepseek_v3", v3, r3);
  EXPECT_NE(r3.prompt_ids, r.prompt_ids);
  EXPECT_EQ(v3.parser.tools, recipe::ToolCallFormat::kDeepseek);
}

TEST(DeepseekV4Serve, ReasoningEffortSwitchesThinking) {
  DI_REQUIRE_DEEPSEEK_TOKENIZER(tok);
  auto encode = [&](const std::string& effort, bool thinking, const std::string& thinking_param) {
    ChatTurn turn;
    turn.messages = {ChatMessage{"user", "Prove it."}};
    turn.reasoning_effort = effort;
    turn.reasoning_effort_param = "reasoning_effort";
    turn.thinking = thinking;
    turn.thinking_param = thinking_param;
    engine::GenerationRequest r;
    encode_chat_turn(*tok, "deepseek_v4", turn, r);
    EXPECT_EQ(turn.parser.starts_in_reasoning, turn.thinking);
    return r.prompt_ids;
  };
  recipe::DeepseekV4ChatOptions chat, think, max;
  think.thinking = max.thinking = true;
  max.effort = recipe::DeepseekV4Effort::kMax;
  const std::vector<ChatMessage> m = {ChatMessage{"user", "Prove it."}};
  EXPECT_EQ(encode("", false, ""), expected(*tok, m, chat));  // thinking is off by default
  EXPECT_EQ(encode("high", false, ""), expected(*tok, m, think));
  EXPECT_EQ(encode("low", false, ""), expected(*tok, m, think));
  EXPECT_EQ(encode("max", false, ""), expected(*tok, m, max));
  EXPECT_EQ(encode("xhigh", false, ""), expected(*tok, m, max));
  EXPECT_EQ(encode("none", false, ""), expected(*tok, m, chat));
  // An explicit thinking switch wins over the effort's on/off; the level still applies.
  EXPECT_EQ(encode("max", false, "chat_template_kwargs.thinking"), expected(*tok, m, chat));
  EXPECT_EQ(encode("none", true, "chat_template_kwargs.thinking"), expected(*tok, m, think));
  try {
    encode("ludicrous", false, "");
    ADD_FAILURE() << "an unknown effort was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "reasoning_effort");
    EXPECT_NE(std::string(e.what()).find("ludicrous"), std::string::npos);
  }
}

TEST(DeepseekV4Serve, HistoryReasoningAndToolResultsReachThePrompt) {
  DI_REQUIRE_DEEPSEEK_TOKENIZER(tok);
  ChatTurn turn = weather_turn();
  ChatMessage call{"assistant", ""};
  call.reasoning_content = "Need the weather tool.";
  call.tool_calls_json = template_tool_calls_json({{"call_1", "get_weather", R"({"city": "Paris"})"}});
  ChatMessage result{"tool", "18C"};
  result.tool_call_id = "call_1";
  turn.messages.push_back(call);
  turn.messages.push_back(result);
  turn.thinking = true;
  turn.thinking_param = "thinking.type";
  engine::GenerationRequest r;
  encode_chat_turn(*tok, "deepseek_v4", turn, r);
  const std::string text = tok->decode(r.prompt_ids);
  EXPECT_NE(text.find("<think>Need the weather tool.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke "
                      "name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris"
                      "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>"
                      "<｜User｜><tool_result>18C</tool_result><｜Assistant｜><think>"),
            std::string::npos)
      << text;
}

TEST(DeepseekV4Serve, HistoryCallArgumentsKeepTheClientsOrder) {
  DI_REQUIRE_DEEPSEEK_TOKENIZER(tok);
  ChatTurn turn;
  ChatMessage call{"assistant", ""};
  call.tool_calls_json = template_tool_calls_json({{"c", "f", R"({"zeta": 1, "alpha": "x"})"}});
  turn.messages = {ChatMessage{"user", "go"}, call, ChatMessage{"user", "next"}};
  engine::GenerationRequest r;
  encode_chat_turn(*tok, "deepseek_v4", turn, r);
  const std::string text = tok->decode(r.prompt_ids);
  EXPECT_NE(text.find("<｜DSML｜parameter name=\"zeta\" string=\"false\">1</｜DSML｜parameter>\n"
                      "<｜DSML｜parameter name=\"alpha\" string=\"true\">x</｜DSML｜parameter>"),
            std::string::npos)
      << text;
}

TEST(DeepseekV4Serve, ReplySplitsIntoReasoningContentAndCalls) {
  DI_REQUIRE_DEEPSEEK_TOKENIZER(tok);
  ChatTurn turn = weather_turn();
  turn.thinking = true;
  turn.thinking_param = "thinking.type";
  engine::GenerationRequest r;
  encode_chat_turn(*tok, "deepseek_v4", turn, r);
  const std::string reply =
      "Paris weather needed.</think>One moment.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>";
  ParsedOutput whole = parse_chat_output(turn, reply);
  EXPECT_EQ(whole.reasoning_content, "Paris weather needed.");
  EXPECT_EQ(whole.content, "One moment.");
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  EXPECT_EQ(whole.tool_calls[0].name, "get_weather");
  EXPECT_EQ(whole.tool_calls[0].arguments_json, R"({"city": "Paris"})");
  // Streamed token by token (the model's own tokens), the visible text only grows.
  const std::vector<int32_t> ids = tok->encode(reply, /*allow_special=*/true);
  ChatOutputStream s(turn);
  std::string seen_content, seen_reasoning;
  for (size_t i = 0; i < ids.size(); ++i) {
    s.push(tok->decode(std::vector<int32_t>{ids[i]}));
    EXPECT_TRUE(s.content().starts_with(seen_content));
    EXPECT_TRUE(s.reasoning().starts_with(seen_reasoning));
    EXPECT_EQ(s.content().find("DSML"), std::string::npos);
    seen_content = s.content();
    seen_reasoning = s.reasoning();
  }
  ParsedOutput streamed = s.finish();
  EXPECT_EQ(streamed.content, whole.content);
  EXPECT_EQ(streamed.reasoning_content, whole.reasoning_content);
  ASSERT_EQ(streamed.tool_calls.size(), 1u);
  EXPECT_EQ(streamed.tool_calls[0].arguments_json, whole.tool_calls[0].arguments_json);
}

TEST(DeepseekV4Serve, ChatModeWithoutToolsIsPlainText) {
  DI_REQUIRE_DEEPSEEK_TOKENIZER(tok);
  ChatTurn turn;
  turn.messages = {ChatMessage{"user", "hi"}};
  engine::GenerationRequest r;
  encode_chat_turn(*tok, "deepseek_v4", turn, r);
  EXPECT_EQ(tok->decode(r.prompt_ids), "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>");
  // A DSML-looking reply without tools offered is the model's text.
  ParsedOutput out = parse_chat_output(turn, "Hello <｜DSML｜tool_calls>");
  EXPECT_EQ(out.content, "Hello <｜DSML｜tool_calls>");
  EXPECT_TRUE(out.tool_calls.empty());
}

}  // namespace
}  // namespace deepinfer::serve
