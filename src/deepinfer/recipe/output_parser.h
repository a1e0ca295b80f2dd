// Generated text -> {content, reasoning_content, tool_calls}, whole or streamed in deltas, for
// the DeepSeek V3/R1/V3.1 markers, DeepSeek-V4's DSML, Hermes/Qwen <tool_call> JSON and Llama 3.1 JSON calls. A
// marker split across deltas is held back, never emitted as content; a malformed call stays
// content.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/recipe/tool_call.h"

namespace deepinfer::model {
struct ModelConfig;
}

namespace deepinfer::recipe {

enum class ToolCallFormat {
  kNone,      // tool-call markup is ordinary content
  kDeepseek,  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>...<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
  kHermes,    // <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Qwen2.5/3, Hermes)
  kLlama3Json,  // the whole reply is {"name": ..., "parameters": {...}} (Llama 3.1), optionally
                // after <|python_tag|>
  kDeepseekDsml,  // DeepSeek-V4: <｜DSML｜tool_calls><｜DSML｜invoke name="...">
                  // <｜DSML｜parameter ...>...</｜DSML｜invoke>...</｜DSML｜tool_calls>
};

struct OutputParserOptions {
  ToolCallFormat tools = ToolCallFormat::kNone;
  bool reasoning_tags = false;      // <think>...</think> separates reasoning_content
  bool starts_in_reasoning = false;  // the prompt already opened <think> (V3.1/R1 thinking)
};

struct ParsedOutput {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;  // ids assigned (make_tool_call_id)
};

// What one push() adds: text to append to content / reasoning, and calls completed by it.
using OutputDelta = ParsedOutput;

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions options);

  OutputDelta push(std::string_view text);
  // End of generation: flushes held-back text; an unterminated call is parsed if complete,
  // else returned as content.
  OutputDelta finish();

  // Everything so far (all deltas joined).
  const ParsedOutput& result() const { return total_; }
  const OutputParserOptions& options() const { return options_; }

  static ParsedOutput parse(const OutputParserOptions& options, std::string_view text);

 private:
  enum class State { kContent, kReasoning, kToolSection };
  void process(bool final, OutputDelta* d);
  bool step_content(bool final, OutputDelta* d);
  bool step_reasoning(bool final, OutputDelta* d);
  bool step_tools(bool final, OutputDelta* d);
  void emit(std::string_view s, bool reasoning, OutputDelta* d);
  void emit_call(ToolCall call, OutputDelta* d);

  OutputParserOptions options_;
  State state_ = State::kContent;
  std::string buf_;          // text not yet classified
  std::string pending_ws_;   // trailing whitespace held until more text shows it is inner
  bool strip_leading_ = false;  // drop whitespace right after <think> / </think>
  bool seen_text_ = false;      // non-whitespace output so far (markers that only open a reply)
  std::string section_open_;    // the marker that opened the current tool section
  bool section_had_call_ = false;
  size_t tool_scanned_ = 0;     // bytes of buf_ searched for a tool section's end markers
  ParsedOutput total_;
};

// The tool-call format and reasoning tags that fit a model: from its chat template's markers
// first, then its architecture (e.g. "deepseek_v3", "qwen2", "llama"). `thinking`: the prompt
// was rendered in thinking mode (opens <think> for DeepSeek V3.1/R1 and Qwen3-style templates).
OutputParserOptions output_parser_options_for(std::string_view architecture,
                                              std::string_view chat_template, bool tools,
                                              bool thinking);
OutputParser make_output_parser(const model::ModelConfig& config, const std::string& chat_template,
                                bool tools, bool thinking);

}  // namespace deepinfer::recipe
