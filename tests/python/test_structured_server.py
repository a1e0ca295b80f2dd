"""Structured outputs through `deepinfer serve` under hostile schemas (issue 31): a deeply nested
schema in response_format is a 400 and the server keeps serving; a schema that allows nothing
is a 400, never an empty "stop" answer."""
import pytest

from server_util import Server, post_json

MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def server(model):
    s = Server(model, "--served-model-name", MODEL)
    yield s
    s.stop()


def chat_with_schema(server, schema_text):
    raw = ('{"model":"%s","messages":[{"role":"user","content":"hi"}],"max_tokens":8,'
           '"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":%s}}}'
           % (MODEL, schema_text)).encode()
    return post_json(server, "/v1/chat/completions", None, raw=raw, timeout=120)


@pytest.mark.parametrize("schema_text", [
    '{"const":' + "[" * 50000 + "]" * 50000 + "}",
    '{"type":"string","description":' + '{"a":' * 100000 + "1" + "}" * 100000 + "}",
])
def test_deep_schema_is_a_400_and_the_server_lives(server, schema_text):
    status, body = chat_with_schema(server, schema_text)
    assert status == 400 and "nested more than 256 levels" in body["error"]["message"], body
    status, body = chat_with_schema(server, '{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}')
    assert status == 200, body
    assert server.proc.poll() is None


@pytest.mark.parametrize("schema_text", ['{"$ref":"#"}', "false",
                                         '{"type":"object","required":["a"],"properties":{"a":{"$ref":"#/properties/a"}}}'])
def test_schema_that_allows_nothing_is_a_400(server, schema_text):
    status, body = chat_with_schema(server, schema_text)
    assert status == 400 and "no JSON value satisfies it" in body["error"]["message"], body
