"""Structured outputs end to end through the CLI (issue 31): hostile schemas are refused with
one line and exit 2 (never a crash), schemas, regexes and grammars that allow nothing are
refused instead of answering "" with finish_reason "stop", an unsatisfiable property is never
written, and `bench --mode mask` checks both JSON modes, keys included."""
import json
import re

import pytest

from conftest import run


def one_line_error(r, code, *words):
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[-2000:]
    for w in words:
        assert w in lines[0], lines[0]


def generate(model, *args):
    return run("generate", "--model", model, "--prompt", "hi", "--max-tokens", "24", *args)


@pytest.mark.parametrize("doc,where", [
    ('{"const":' + "[" * 50000 + "]" * 50000 + "}", "/const"),
    ('{"enum":[' + "[" * 50000 + "]" * 50000 + "]}", "/enum"),
    ('{"type":"string","description":' + '{"a":' * 100000 + "1" + "}" * 100000 + "}", "/description"),
])
def test_deep_schemas_are_refused_not_crashed(model, tmp_path, doc, where):
    path = tmp_path / "d.json"
    path.write_text(doc)
    r = generate(model, "--json-schema", path)
    one_line_error(r, 2, "--json-schema", "nested more than 256 levels deep", where)


def test_deep_regex_and_grammar_are_refused(model, tmp_path):
    # (one argument is at most 128 KiB)
    one_line_error(generate(model, "--regex", "(" * 50000 + "a" + ")" * 50000), 2, "--regex",
                   "nested more than 256 deep")
    g = tmp_path / "g.ebnf"
    g.write_text("root ::= " + "(" * 100000 + '"a"' + ")" * 100000 + "\n")
    one_line_error(generate(model, "--grammar", g), 2, "--grammar", "nested more than 256")


@pytest.mark.parametrize("schema", [
    {"$ref": "#"},
    {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
    {"type": "object", "required": ["a"], "properties": {"a": {"$ref": "#/properties/a"}}},
    False,
])
def test_schemas_that_allow_nothing_are_refused(model, tmp_path, schema):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    one_line_error(generate(model, "--json-schema", path), 2, "no JSON value satisfies it")


@pytest.mark.parametrize("regex", [r"[^\s\S]", "a^b"])
def test_regexes_that_match_nothing_are_refused(model, regex):
    one_line_error(generate(model, "--regex", regex), 2, "matches no string")


def test_grammar_that_matches_nothing_is_refused(model, tmp_path):
    g = tmp_path / "g.ebnf"
    g.write_text("root ::= a\na ::= b\nb ::= a\n")
    one_line_error(generate(model, "--grammar", g), 2, "matches no string")


def test_bad_and_unsupported_inputs_are_usage_errors(model, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    one_line_error(generate(model, "--json-schema", bad), 2, "--json-schema", "not valid JSON")
    unsupported = tmp_path / "u.json"
    unsupported.write_text('{"type": "object", "unevaluatedProperties": false}')
    one_line_error(generate(model, "--json-schema", unsupported), 2, "'unevaluatedProperties'")
    one_line_error(generate(model, "--regex", "(ab"), 2, "--regex", "missing ')'")
    g = tmp_path / "g.ebnf"
    g.write_text("root ::= undefined_rule\n")
    one_line_error(generate(model, "--grammar", g), 2, "'undefined_rule'")


def test_unsatisfiable_property_is_never_written(model, tmp_path):
    import jsonschema
    schema = {"type": "object",
              "properties": {"dead": {"$ref": "#/properties/dead"},
                             "name": {"type": "string", "maxLength": 12},
                             "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name"]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    for seed in range(4):
        r = run("generate", "--model", model, "--prompt", "A person as JSON with a dead field",
                "--json-schema", path, "--max-tokens", "48", "--temperature", "1.2", "--seed", seed, "--json")
        assert r.returncode == 0, r.stderr
        rec = json.loads(r.stdout)
        assert rec["finish_reason"] in ("stop", "length"), rec
        if rec["finish_reason"] == "stop":
            value = json.loads(rec["text"])
            jsonschema.validate(value, schema)
            assert "dead" not in value


def test_new_formats_and_combinations_generate_valid_output(model, tmp_path):
    import jsonschema
    duration = re.compile(r"P((\d+D|\d+M(\d+D)?|\d+Y(\d+M(\d+D)?)?)(T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S))?"
                          r"|T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S)|\d+W)")
    schema = {"type": "object",
              "properties": {"wait": {"type": "string", "format": "duration"},
                             "step": {"type": "number", "multipleOf": 2.5},
                             "v": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 5}],
                                   "oneOf": [{"type": "integer", "minimum": 5}, {"type": "integer", "maximum": 7},
                                             {"type": "string"}]}},
              "required": ["wait", "step", "v"], "additionalProperties": False}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    for seed in range(3):
        r = run("generate", "--model", model, "--prompt", "A timer as JSON", "--json-schema", path,
                "--max-tokens", "64", "--temperature", "1.0", "--seed", seed, "--json")
        assert r.returncode == 0, r.stderr
        rec = json.loads(r.stdout)
        if rec["finish_reason"] != "stop":
            continue
        value = json.loads(rec["text"])
        jsonschema.validate(value, schema)  # multipleOf, anyOf and oneOf checked independently
        assert duration.fullmatch(value["wait"]), value


def test_bench_mask_checks_both_json_modes_keys_included(model, tmp_path):
    data = tmp_path / "bench"
    data.mkdir()
    (data / "Test---open.json").write_text(json.dumps(
        {"schema": {"type": "object", "properties": {"a": {"type": "string"}}},
         "tests": [{"valid": True, "data": {"a": "x", "other": 1}}, {"valid": False, "data": {"a": 1}}]}))
    r = run("bench", "--mode", "mask", "--model", model, "--data", data)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.strip().splitlines()]
    assert sorted(line["json_mode"] for line in lines) == ["compact", "whitespace"]
    for line in lines:
        assert line["wrongly_accepted"] == 0 and line["mask_mismatches"] == 0, line
        assert line["wrongly_rejected"] == 0, line
        # 8 variants; those with bytes the vocabulary has no token for (0xFF, 0xC0 in SmolLM2)
        # cannot be generated and are not walked.
        assert line["ill_formed_utf8_walked"] >= 4, line
    assert "== JSON mode: compact ==" in r.stderr and "== JSON mode: whitespace ==" in r.stderr
