// Streaming output parser (see output_parser.h): a three-state scanner (content, reasoning,
// tool section) over a buffer that keeps back any tail that could still grow into a marker.
#include "deepinfer/recipe/output_parser.h"

#include <algorithm>

#include "deepinfer/model/model_config.h"
#include "deepinfer/recipe/deepseek_chat.h"
#include "deepinfer/recipe/deepseek_v4_chat.h"

namespace deepinfer::recipe {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsmlCallsBegin = "<｜DSML｜tool_calls>";
constexpr std::string_view kDsmlCallsEnd = "</｜DSML｜tool_calls>";
constexpr std::string_view kDsmlInvokeBegin = "<｜DSML｜invoke";
constexpr std::string_view kDsmlInvokeEnd = "</｜DSML｜invoke>";
constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr size_t kMaxMarker = 32;  // longer than any end marker

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool all_ws(std::string_view s) {
  return std::all_of(s.begin(), s.end(), is_ws);
}

// Length of the longest tail of `s` that is a proper prefix of `marker`.
size_t partial_tail(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

struct Found {
  size_t pos = std::string_view::npos;
  std::string_view marker;
};

Found find_first(std::string_view s, const std::vector<std::string_view>& markers) {
  Found f;
  for (std::string_view m : markers) {
    size_t p = s.find(m);
    if (p < f.pos) f = {p, m};
  }
  return f;
}

}  // namespace

OutputParser::OutputParser(OutputParserOptions options) : options_(options) {
  if (options_.starts_in_reasoning) {
    state_ = State::kReasoning;
    strip_leading_ = true;
  }
}

// Whitespace right after <think> / </think> is dropped; whitespace at the end waits, dropped if
// a marker follows and kept if text does.
void OutputParser::emit(std::string_view s, bool reasoning, OutputDelta* d) {
  if (s.empty()) return;
  if (strip_leading_) {
    while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
    if (s.empty()) return;
    strip_leading_ = false;
  }
  size_t keep = s.size();
  while (keep > 0 && is_ws(s[keep - 1])) --keep;
  if (keep == 0) {
    pending_ws_.append(s);
    return;
  }
  std::string out = std::move(pending_ws_);
  pending_ws_.clear();
  out.append(s.substr(0, keep));
  pending_ws_.assign(s.substr(keep));
  if (reasoning) {
    d->reasoning_content += out;
    total_.reasoning_content += out;
  } else {
    seen_text_ = true;
    d->content += out;
    total_.content += out;
  }
}

void OutputParser::emit_call(ToolCall call, OutputDelta* d) {
  call.id = make_tool_call_id();
  section_had_call_ = true;
  seen_text_ = true;
  d->tool_calls.push_back(call);
  total_.tool_calls.push_back(std::move(call));
}

// Each step consumes from buf_ and returns true when it changed state (run again).
bool OutputParser::step_content(bool final, OutputDelta* d) {
  // Markers that only open a reply (nothing but blanks before them) and markers seen anywhere.
  std::vector<std::string_view> start_only, anywhere;
  if (!seen_text_ && all_ws(pending_ws_)) {
    if (options_.reasoning_tags) start_only.push_back(kThinkOpen);
    if (options_.tools == ToolCallFormat::kLlama3Json) {
      start_only.push_back(kPythonTag);
      start_only.push_back("{");
    }
  }
  if (options_.tools == ToolCallFormat::kDeepseek) anywhere.push_back(kDsCallsBegin);
  if (options_.tools == ToolCallFormat::kDeepseekDsml) anywhere.push_back(kDsmlCallsBegin);
  if (options_.tools == ToolCallFormat::kHermes) anywhere.push_back(kHermesOpen);
  const std::string_view view(buf_);
  const size_t lead = std::min(view.find_first_not_of(" \t\r\n"), view.size());
  Found f = find_first(view, anywhere);
  for (std::string_view m : start_only)
    if (view.substr(lead).starts_with(m) && lead < f.pos) f = {lead, m};
  if (f.pos == std::string_view::npos) {
    size_t hold = 0;
    if (!final) {
      for (std::string_view m : anywhere) hold = std::max(hold, partial_tail(view, m));
      for (std::string_view m : start_only)
        if (lead == view.size() || m.starts_with(view.substr(lead))) hold = std::max(hold, view.size() - lead);
    }
    emit(view.substr(0, view.size() - hold), false, d);
    buf_.erase(0, buf_.size() - hold);
    return false;
  }
  emit(std::string_view(buf_).substr(0, f.pos), false, d);
  pending_ws_.clear();  // whitespace before a marker is layout, not content
  if (f.marker == kThinkOpen) {
    state_ = State::kReasoning;
    strip_leading_ = true;
    buf_.erase(0, f.pos + f.marker.size());
    return true;
  }
  section_open_ = std::string(f.marker);
  section_had_call_ = false;
  state_ = State::kToolSection;
  // Llama's "{" belongs to the call text itself.
  buf_.erase(0, f.pos + (f.marker == "{" ? 0 : f.marker.size()));
  return true;
}

bool OutputParser::step_reasoning(bool final, OutputDelta* d) {
  const size_t p = buf_.find(kThinkClose);
  if (p == std::string::npos) {
    const size_t hold = final ? 0 : partial_tail(buf_, kThinkClose);
    emit(std::string_view(buf_).substr(0, buf_.size() - hold), true, d);
    buf_.erase(0, buf_.size() - hold);
    if (final) pending_ws_.clear();
    return false;
  }
  emit(std::string_view(buf_).substr(0, p), true, d);
  pending_ws_.clear();
  buf_.erase(0, p + kThinkClose.size());
  state_ = State::kContent;
  strip_leading_ = true;
  return true;
}

bool OutputParser::step_tools(bool final, OutputDelta* d) {
  auto to_content = [&](const std::string& raw) {
    strip_leading_ = false;
    emit(raw, false, d);
  };
  // Bytes already searched hold no end marker, except one that a later byte may complete:
  // resume there so a long call streamed token by token stays linear.
  const size_t from = tool_scanned_ > kMaxMarker ? tool_scanned_ - kMaxMarker : 0;
  if (options_.tools == ToolCallFormat::kDeepseek || options_.tools == ToolCallFormat::kDeepseekDsml) {
    // Complete calls go out one by one; the section ends at <｜tool▁calls▁end｜> (V4:
    // </｜DSML｜tool_calls>).
    const bool dsml = options_.tools == ToolCallFormat::kDeepseekDsml;
    const std::string_view call_begin = dsml ? kDsmlInvokeBegin : kDsCallBegin;
    const std::string_view call_end = dsml ? kDsmlInvokeEnd : kDsCallEnd;
    const std::string_view calls_end = dsml ? kDsmlCallsEnd : kDsCallsEnd;
    size_t start = from;  // 0 once buf_ has been cut
    while (true) {
      const size_t end = buf_.find(call_end, start);
      const size_t close = buf_.find(calls_end, start);
      if (end == std::string::npos || (close != std::string::npos && close < end)) break;
      const std::string call_text = buf_.substr(0, end + call_end.size());
      std::string_view body = std::string_view(buf_).substr(0, end);
      const size_t b = body.find(call_begin);
      std::optional<ToolCall> call;
      if (b != std::string_view::npos && all_ws(body.substr(0, b))) {
        body.remove_prefix(b + call_begin.size());
        call = dsml ? parse_dsml_invoke(body) : parse_deepseek_tool_call(body);
      }
      // A bad call is shown as text (V4's newline between calls is layout, not part of it).
      const size_t lead = dsml ? std::min(call_text.find_first_not_of(" \t\r\n"), call_text.size()) : 0;
      if (call) emit_call(std::move(*call), d);
      else to_content(call_text.substr(lead));
      buf_.erase(0, call_text.size());
      start = 0;
    }
    tool_scanned_ = 0;
    const size_t close = buf_.find(calls_end, start);
    if (close != std::string::npos) {
      if (!all_ws(std::string_view(buf_).substr(0, close))) to_content(buf_.substr(0, close));
      buf_.erase(0, close + calls_end.size());
      state_ = State::kContent;
      return true;
    }
    if (final) {
      if (!all_ws(buf_)) to_content((section_had_call_ ? "" : section_open_) + buf_);
      buf_.clear();
      state_ = State::kContent;
    }
    tool_scanned_ = buf_.size();
    return false;
  }
  if (options_.tools == ToolCallFormat::kHermes) {
    const size_t close = buf_.find(kHermesClose, from);
    if (close == std::string::npos && !final) {
      tool_scanned_ = buf_.size();
      return false;
    }
    tool_scanned_ = 0;
    std::string_view body = std::string_view(buf_).substr(0, std::min(close, buf_.size()));
    auto call = parse_json_tool_call(body);
    if (call) emit_call(std::move(*call), d);
    else to_content(std::string(kHermesOpen) + buf_.substr(0, close == std::string::npos ? buf_.size() : close + kHermesClose.size()));
    buf_.erase(0, close == std::string::npos ? buf_.size() : close + kHermesClose.size());
    state_ = State::kContent;
    return close != std::string::npos;
  }
  // Llama 3.1 JSON: the rest of the reply is the call(s); only the end tells.
  if (!final) return false;
  auto calls = parse_json_tool_calls(buf_);
  if (calls) {
    for (auto& c : *calls) emit_call(std::move(c), d);
  } else {
    to_content((section_open_ == "{" ? "" : section_open_) + buf_);
  }
  buf_.clear();
  state_ = State::kContent;
  return false;
}

void OutputParser::process(bool final, OutputDelta* d) {
  bool again = true;
  while (again) {
    switch (state_) {
      case State::kContent: again = step_content(final, d); break;
      case State::kReasoning: again = step_reasoning(final, d); break;
      case State::kToolSection: again = step_tools(final, d); break;
    }
  }
}

OutputDelta OutputParser::push(std::string_view text) {
  OutputDelta d;
  buf_.append(text);
  process(false, &d);
  return d;
}

OutputDelta OutputParser::finish() {
  OutputDelta d;
  process(true, &d);
  if (state_ == State::kContent && !pending_ws_.empty() && total_.tool_calls.empty()) {
    // Trailing whitespace of a plain reply is the model's; after a call it is layout.
    d.content += pending_ws_;
    total_.content += pending_ws_;
  }
  pending_ws_.clear();
  return d;
}

ParsedOutput OutputParser::parse(const OutputParserOptions& options, std::string_view text) {
  OutputParser p(options);
  p.push(text);
  p.finish();
  return p.result();
}

OutputParserOptions output_parser_options_for(std::string_view architecture,
                                              std::string_view chat_template, bool tools,
                                              bool thinking) {
  if (uses_deepseek_v4_chat(architecture)) return deepseek_v4_output_parser_options(tools, thinking);
  OutputParserOptions o;
  const auto has = [&](std::string_view s) { return chat_template.find(s) != std::string_view::npos; };
  // The template decides when there is one: Kimi K2 shares DeepSeek-V3's architecture but not
  // its markers.
  const auto style = deepseek_style_from_template(std::string(chat_template));
  const bool deepseek = has(kDsCallsBegin) || style.has_value() ||
                        (chat_template.empty() &&
                         (architecture == "deepseek_v3" || architecture == "deepseek_v2"));
  ToolCallFormat format = ToolCallFormat::kHermes;  // also our server's fallback instructions
  if (deepseek) {
    format = ToolCallFormat::kDeepseek;
    o.reasoning_tags = true;
    if (thinking && style != DeepseekChatStyle::kV3) o.starts_in_reasoning = true;
  } else if (has(kHermesOpen)) {
    format = ToolCallFormat::kHermes;
  } else if (has(kPythonTag) || (has("<|start_header_id|>") && has("\"parameters\""))) {
    format = ToolCallFormat::kLlama3Json;
  }
  if (has(kThinkClose)) o.reasoning_tags = true;
  o.tools = tools ? format : ToolCallFormat::kNone;
  return o;
}

OutputParser make_output_parser(const model::ModelConfig& config, const std::string& chat_template,
                                bool tools, bool thinking) {
  return OutputParser(output_parser_options_for(config.architecture, chat_template, tools, thinking));
}

}  // namespace deepinfer::recipe
