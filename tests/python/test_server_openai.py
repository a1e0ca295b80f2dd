"""`deepinfer serve` through the official `openai` SDK: chat completions, completions and
responses, streaming and not, n > 1, stop strings, logprobs, structured output, tools round
trip, previous_response_id, usage numbers and cached tokens."""
import json

import jsonschema
import openai
import pytest

from conftest import run
from server_util import Server


@pytest.fixture(scope="module")
def server(model):
    s = Server(model, "--served-model-name", "smollm2-135m-instruct")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def ask(text):
    return [{"role": "user", "content": text}]


def test_models_lists_the_served_model(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["smollm2-135m-instruct"]


def test_chat_greedy_answer_and_usage(client, model):
    r = client.chat.completions.create(model="smollm2-135m-instruct", messages=ask("What is the capital of France?"),
                                       max_tokens=32, temperature=0)
    choice = r.choices[0]
    assert "Paris" in choice.message.content
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # The completion's token count matches the tokenizer's count of its text (+ EOS).
    ids = json.loads(run("tokenize", "--model", model, choice.message.content).stdout)["ids"]
    assert r.usage.completion_tokens in (len(ids), len(ids) + 1)


def test_chat_stream_matches_non_stream(client):
    kwargs = dict(model="smollm2-135m-instruct", messages=ask("Name three colors."), max_tokens=24, temperature=0)
    whole = client.chat.completions.create(**kwargs)
    chunks = list(client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_chat_n_and_seed_are_reproducible(client):
    kwargs = dict(model="smollm2-135m-instruct", messages=ask("Write a word."), max_tokens=8, temperature=1.0,
                  n=3, seed=123)
    a = client.chat.completions.create(**kwargs)
    b = client.chat.completions.create(**kwargs)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]
    assert 3 <= a.usage.completion_tokens <= 3 * 8


def test_chat_stop_string(client):
    r = client.chat.completions.create(model="smollm2-135m-instruct", messages=ask("What is the capital of France?"),
                                       max_tokens=32, temperature=0, stop=["Paris"])
    assert "Paris" not in r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"


def test_chat_logprobs(client):
    r = client.chat.completions.create(model="smollm2-135m-instruct", messages=ask("Hi"), max_tokens=5, temperature=0,
                                       logprobs=True, top_logprobs=3)
    entries = r.choices[0].logprobs.content
    assert len(entries) == r.usage.completion_tokens
    for e in entries:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert e.top_logprobs[0].logprob >= e.top_logprobs[-1].logprob
        assert e.top_logprobs[0].token == e.token  # greedy picks the top token


def test_chat_json_schema_output_validates(client):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "population": {"type": "integer", "minimum": 0, "maximum": 99999999}},
              "required": ["city", "population"], "additionalProperties": False}
    r = client.chat.completions.create(
        model="smollm2-135m-instruct", messages=ask("Describe Paris as JSON."), max_tokens=64, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}})
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_chat_tools_round_trip(client):
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
                       "required": ["city"], "additionalProperties": False}}}]
    messages = ask("What is the weather in Paris?")
    r = client.chat.completions.create(model="smollm2-135m-instruct", messages=messages, tools=tools,
                                       tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                       max_tokens=64, temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather" and isinstance(json.loads(call.function.arguments)["city"], str)
    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"})
    r2 = client.chat.completions.create(model="smollm2-135m-instruct", messages=messages, tools=tools,
                                        max_tokens=32, temperature=0)
    assert r2.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens


def test_chat_required_tool_stream(client):
    tools = [{"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"], "additionalProperties": False}}}]
    chunks = list(client.chat.completions.create(model="smollm2-135m-instruct", messages=ask("Add 2 and 3."),
                                                 tools=tools, tool_choice="required", max_tokens=48, temperature=0,
                                                 stream=True))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls and calls[0].function.name == "add"
    args = json.loads(calls[0].function.arguments)
    assert set(args) == {"a", "b"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_cached_tokens_on_repeated_prefix(client):
    system = "You are a careful assistant. " * 20
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": "Say hi."}]
    client.chat.completions.create(model="smollm2-135m-instruct", messages=msgs, max_tokens=2, temperature=0)
    r = client.chat.completions.create(model="smollm2-135m-instruct", messages=msgs, max_tokens=2, temperature=0)
    cached = r.usage.prompt_tokens_details.cached_tokens
    assert cached >= r.usage.prompt_tokens - 16 and cached > 100


def test_completions_echo_with_prompt_logprobs(client, model):
    # The prompt as token ids, so that the requests below share its tokenization.
    ids = json.loads(run("tokenize", "--model", model, "The capital of France is").stdout)["ids"]
    kwargs = dict(model="smollm2-135m-instruct", max_tokens=3, temperature=0, logprobs=3)
    r = client.completions.create(prompt=ids, echo=True, **kwargs)
    lp = r.choices[0].logprobs
    plain = client.completions.create(prompt=ids, **kwargs)
    assert r.choices[0].text.endswith(plain.choices[0].text)  # the same continuation, after the echo
    assert len(lp.tokens) == len(ids) + r.usage.completion_tokens
    assert r.usage.prompt_tokens == len(ids) and (r.usage.prompt_tokens_details is None or
                                                   not r.usage.prompt_tokens_details.cached_tokens)
    # The first prompt token has no logprob; the generated part equals the plain request's.
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert lp.token_logprobs[len(ids):] == pytest.approx(plain.choices[0].logprobs.token_logprobs, abs=2e-3)
    assert lp.text_offset[:2] == [0, len(lp.tokens[0])]
    # Independently: prompt token k's logprob is what the model gives after the first k tokens,
    # asked one position at a time (max_tokens=1, the 20 most likely tokens).
    for k in range(1, len(ids)):
        step = client.completions.create(model="smollm2-135m-instruct", prompt=ids[:k], max_tokens=1, temperature=0,
                                         logprobs=20)
        top20 = step.choices[0].logprobs.top_logprobs[0]
        assert len(lp.top_logprobs[k]) == 3
        best = sorted(top20.items(), key=lambda kv: -kv[1])[:3]
        for (tok, want), (got_tok, got) in zip(best, sorted(lp.top_logprobs[k].items(), key=lambda kv: -kv[1])):
            assert tok == got_tok and got == pytest.approx(want, abs=2e-3), (k, tok, got_tok)
        if lp.tokens[k] in top20:
            assert lp.token_logprobs[k] == pytest.approx(top20[lp.tokens[k]], abs=2e-3), k
        assert lp.token_logprobs[k] <= max(top20.values()) + 2e-3
    # Streaming gives the same echo, text and logprobs.
    chunks = [c for c in client.completions.create(prompt=ids, echo=True, stream=True, **kwargs) if c.choices]
    assert "".join(c.choices[0].text for c in chunks) == r.choices[0].text
    streamed = [x for c in chunks if c.choices[0].logprobs for x in c.choices[0].logprobs.token_logprobs]
    assert streamed == lp.token_logprobs


def test_completions_text_list_and_stream(client):
    r = client.completions.create(model="smollm2-135m-instruct", prompt=["The capital of France is", "1, 2, 3,"],
                                  max_tokens=4, temperature=0, logprobs=2)
    assert [c.index for c in r.choices] == [0, 1]
    assert all(c.text for c in r.choices)
    assert len(r.choices[0].logprobs.tokens) == len(r.choices[0].logprobs.token_logprobs)
    whole = client.completions.create(model="smollm2-135m-instruct", prompt="1, 2, 3,", max_tokens=6, temperature=0)
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="smollm2-135m-instruct", prompt="1, 2, 3,", max_tokens=6, temperature=0, stream=True) if c.choices)
    assert streamed == whole.choices[0].text
    ids = client.completions.create(model="smollm2-135m-instruct", prompt=[16, 28, 17], max_tokens=2)
    assert ids.usage.prompt_tokens == 3


def test_responses_text_and_previous_response_id(client):
    r = client.responses.create(model="smollm2-135m-instruct", input="What is the capital of France?",
                                instructions="Answer in one sentence.", max_output_tokens=32, temperature=0)
    assert r.status == "completed" and "Paris" in r.output_text
    assert r.usage.input_tokens > 0 and r.usage.input_tokens_details.cached_tokens >= 0
    r2 = client.responses.create(model="smollm2-135m-instruct", input="And of Italy?", previous_response_id=r.id,
                                 max_output_tokens=16, temperature=0)
    assert r2.usage.input_tokens > r.usage.input_tokens
    assert client.responses.retrieve(r.id).id == r.id
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="smollm2-135m-instruct", input="x", previous_response_id="resp_nope")


def test_responses_stream_events(client):
    types = []
    text = ""
    numbers = []
    for event in client.responses.create(model="smollm2-135m-instruct", input="Count to three.",
                                         max_output_tokens=16, temperature=0, stream=True):
        types.append(event.type)
        numbers.append(event.sequence_number)
        if event.type == "response.output_text.delta":
            text += event.delta
        final = getattr(event, "response", None)
    assert numbers == list(range(len(numbers)))
    assert types[0] == "response.created" and types[-1] in ("response.completed", "response.incomplete")
    assert types.index("response.output_item.added") < types.index("response.content_part.added")
    assert types.index("response.content_part.added") < types.index("response.output_text.delta")
    assert text == final.output_text


def test_responses_cut_by_max_output_tokens_marks_its_message_incomplete(client):
    r = client.responses.create(model="smollm2-135m-instruct", input="Write a long story about a cat.",
                                max_output_tokens=3, temperature=0)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3
    assert [item.status for item in r.output] == ["incomplete"]
    done_items, final = [], None
    for event in client.responses.create(model="smollm2-135m-instruct", input="Write a long story about a cat.",
                                         max_output_tokens=3, temperature=0, stream=True):
        if event.type == "response.output_item.done":
            done_items.append(event.item.status)
        final = getattr(event, "response", final)
    assert done_items == ["incomplete"] and final.status == "incomplete"
    assert [item.status for item in final.output] == ["incomplete"]
    whole = client.responses.create(model="smollm2-135m-instruct", input="Say hi.", max_output_tokens=64,
                                    temperature=0)
    assert whole.status == "completed" and [item.status for item in whole.output] == ["completed"]


def test_responses_function_call_round_trip(client):
    tools = [{"type": "function", "name": "lookup", "description": "Look a word up",
              "parameters": {"type": "object", "properties": {"word": {"type": "string", "maxLength": 20}},
                             "required": ["word"], "additionalProperties": False}}]
    r = client.responses.create(model="smollm2-135m-instruct", input="Look up 'cat'.", tools=tools,
                                tool_choice="required", max_output_tokens=48, temperature=0)
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls and calls[0].name == "lookup" and "word" in json.loads(calls[0].arguments)
    r2 = client.responses.create(model="smollm2-135m-instruct", previous_response_id=r.id, tools=tools,
                                 input=[{"type": "function_call_output", "call_id": calls[0].call_id,
                                         "output": "a small domesticated feline"}],
                                 max_output_tokens=16, temperature=0)
    assert r2.status in ("completed", "incomplete")


def test_responses_json_schema(client):
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 40}},
              "required": ["answer"], "additionalProperties": False}
    r = client.responses.create(model="smollm2-135m-instruct", input="Capital of France?", max_output_tokens=40,
                                temperature=0,
                                text={"format": {"type": "json_schema", "name": "a", "schema": schema, "strict": True}})
    jsonschema.validate(json.loads(r.output_text), schema)
