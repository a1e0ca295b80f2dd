"""`deepinfer serve` through the official `anthropic` SDK: messages streaming and not, stop
sequences, tool use round trip, count_tokens, cached prompt tokens, x-api-key."""
import json

import anthropic
import pytest

from server_util import Server

MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def server(model):
    s = Server(model, "--served-model-name", MODEL, "--api-key", "secret-key")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    # The SDK sends the key as x-api-key, with an anthropic-version header.
    return anthropic.Anthropic(base_url=server.url, api_key="secret-key", max_retries=0, timeout=120)


def test_message_greedy(client):
    r = client.messages.create(model=MODEL, max_tokens=32, extra_body={"temperature": 0},
                               messages=[{"role": "user", "content": "What is the capital of France?"}])
    assert r.type == "message" and r.role == "assistant"
    assert r.content[0].type == "text" and "Paris" in r.content[0].text
    assert r.stop_reason == "end_turn"
    assert r.usage.input_tokens > 0 and r.usage.output_tokens > 0


def test_message_system_and_stop_sequence(client):
    r = client.messages.create(model=MODEL, max_tokens=32, extra_body={"temperature": 0}, system="You are a helpful AI assistant named SmolLM, trained by Hugging Face",
                               stop_sequences=["Paris"],
                               messages=[{"role": "user", "content": "What is the capital of France?"}])
    assert r.stop_reason == "stop_sequence" and r.stop_sequence == "Paris"
    assert "Paris" not in r.content[0].text


def test_message_max_tokens(client):
    r = client.messages.create(model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "Tell me a story."}])
    assert r.stop_reason == "max_tokens" and r.usage.output_tokens == 3


def test_stream_events_and_text(client):
    kwargs = dict(model=MODEL, max_tokens=24, extra_body={"temperature": 0}, messages=[{"role": "user", "content": "Name a fruit."}])
    whole = client.messages.create(**kwargs)
    events = []
    with client.messages.stream(**kwargs) as stream:
        for event in stream:
            events.append(event.type)
        final = stream.get_final_message()
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "content_block_start" in events and "content_block_stop" in events and "message_delta" in events
    assert final.content[0].text == whole.content[0].text
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens


def test_tool_use_round_trip(client):
    tools = [{"name": "get_weather", "description": "Weather in a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
                               "required": ["city"], "additionalProperties": False}}]
    messages = [{"role": "user", "content": "What's the weather in Paris?"}]
    r = client.messages.create(model=MODEL, max_tokens=64, extra_body={"temperature": 0}, tools=tools,
                               tool_choice={"type": "tool", "name": "get_weather"}, messages=messages)
    assert r.stop_reason == "tool_use"
    use = [b for b in r.content if b.type == "tool_use"][0]
    assert use.name == "get_weather" and isinstance(use.input["city"], str)
    messages.append({"role": "assistant", "content": [b.model_dump() for b in r.content]})
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                  "content": "Sunny, 21 C"}]})
    r2 = client.messages.create(model=MODEL, max_tokens=24, extra_body={"temperature": 0}, tools=tools, messages=messages)
    assert r2.stop_reason in ("end_turn", "max_tokens", "tool_use")
    # Streaming a forced tool call gives a tool_use block with the full input.
    with client.messages.stream(model=MODEL, max_tokens=64, extra_body={"temperature": 0}, tools=tools,
                                tool_choice={"type": "any"}, messages=messages[:1]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use" and final.content[-1].type == "tool_use"
    assert "city" in final.content[-1].input


def test_count_tokens_matches_usage(client):
    messages = [{"role": "user", "content": "Count my tokens, please."}]
    counted = client.messages.count_tokens(model=MODEL, messages=messages)
    r = client.messages.create(model=MODEL, max_tokens=1, messages=messages)
    assert counted.input_tokens == r.usage.input_tokens + r.usage.cache_read_input_tokens


def test_cache_read_tokens_on_repeated_prefix(client):
    system = "You are a precise assistant who answers in one word. " * 15
    messages = [{"role": "user", "content": "Hi"}]
    client.messages.create(model=MODEL, max_tokens=1, system=system, messages=messages)
    r = client.messages.create(model=MODEL, max_tokens=1, system=system, messages=messages)
    assert r.usage.cache_read_input_tokens > 100
    assert r.usage.input_tokens < 20


def test_wrong_key_is_authentication_error(server):
    bad = anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "x"}])


def test_bad_request_shape(client):
    with pytest.raises(anthropic.BadRequestError) as err:
        client.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "robot", "content": "x"}])
    body = err.value.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "messages.0.role" in body["error"]["message"]
