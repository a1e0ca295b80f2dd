"""End-to-end checks of the `deepinfer` CLI against the default model."""
import json
import os
import shutil

import pytest

from conftest import MODEL, run


def test_help_everywhere(binary):
    r = run("--help")
    assert r.returncode == 0 and "generate" in r.stdout
    for sub in ["generate", "chat", "tokenize", "detokenize", "pull", "bench", "serve", "cluster"]:
        r = run(sub, "--help")
        assert r.returncode == 0, (sub, r.stderr)
        assert "--" in r.stdout


def test_usage_errors_exit_2(binary):
    assert run().returncode == 2
    assert run("no-such-command").returncode == 2
    assert run("generate", "--max-tokens", "-5", "--prompt", "x").returncode == 2
    assert run("generate", "--temperature", "abc", "--prompt", "x").returncode == 2


def test_generate_answers_paris(model):
    r = run("generate", "--model", model, "--prompt", "What is the capital of France?",
            "--max-tokens", "32")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout


def test_generate_json_record_and_determinism(model):
    args = ["generate", "--model", model, "--prompt", "Tell me a story about a dragon.",
            "--max-tokens", "24", "--temperature", "0.8", "--seed", "7", "--json", "--logprobs", "2"]
    a = run(*args)
    b = run(*args)
    assert a.returncode == 0, a.stderr
    rec = json.loads(a.stdout.strip().splitlines()[0])
    assert rec["index"] == 0
    assert rec["finish_reason"] in ("stop", "length")
    assert len(rec["token_ids"]) == rec["usage"]["completion_tokens"]
    assert rec["usage"]["prompt_tokens"] > 0 and "cached_tokens" in rec["usage"]
    assert len(rec["logprobs"]) == len(rec["token_ids"])
    for lp in rec["logprobs"]:
        assert len(lp["top"]) == 2 and lp["logprob"] <= 0
    assert a.stdout == b.stdout  # same seed, same tokens and logprobs


def test_generate_stop_string_and_max_tokens(model):
    r = run("generate", "--model", model, "--no-chat", "--prompt", "1, 2, 3, 4, 5,",
            "--max-tokens", "40", "--stop", "9", "--json")
    rec = json.loads(r.stdout)
    assert rec["finish_reason"] == "stop"
    assert "9" not in rec["text"] and "8" in rec["text"]
    r = run("generate", "--model", model, "--no-chat", "--prompt", "1, 2, 3, 4, 5,",
            "--max-tokens", "5", "--json")
    rec = json.loads(r.stdout)
    assert rec["finish_reason"] == "length" and rec["usage"]["completion_tokens"] == 5


def test_generate_input_output_jsonl(model, tmp_path):
    inp = tmp_path / "in.jsonl"
    out = tmp_path / "out.jsonl"
    lines = [
        {"prompt": "What is the capital of France?", "max_tokens": 16},
        {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8},
        {"prompt_token_ids": [504, 2988, 282, 4649, 314], "max_tokens": 4, "seed": 3},
    ]
    inp.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    r = run("generate", "--model", model, "--input", inp, "--output", out)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["index"] for x in recs] == [0, 1, 2]
    assert "Paris" in recs[0]["text"]
    assert recs[2]["usage"]["prompt_tokens"] == 5
    assert recs[2]["usage"]["completion_tokens"] <= 4


def test_generate_input_errors_name_the_line(model, tmp_path):
    inp = tmp_path / "bad.jsonl"
    inp.write_text('{"prompt": "ok"}\n{"prompt": 5}\n')
    r = run("generate", "--model", model, "--input", inp)
    assert r.returncode == 2
    assert "bad.jsonl:2" in r.stderr and "prompt" in r.stderr


@pytest.mark.parametrize("field, needle", [('"top_k": 1e300', "field 'top_k' must be an integer"),
                                           ('"top_k": 5.5', "field 'top_k' must be an integer"),
                                           ('"top_k": 4000000000', "top_k must be in [-1, 1073741824], got 4000000000"),
                                           ('"top_p": 1e300', "top_p must be in (0, 1]")])
def test_generate_input_out_of_range_values_name_the_line(model, tmp_path, field, needle):
    # An int field is range-checked before it is stored: 1e300 once became -2147483648.
    inp = tmp_path / "bad.jsonl"
    inp.write_text('{"prompt": "ok"}\n{"prompt": "hi", %s}\n' % field)
    r = run("generate", "--model", model, "--input", inp, "--max-tokens", "2")
    assert r.returncode == 2, r.stderr
    assert "bad.jsonl:2" in r.stderr and needle in r.stderr


def test_tokenize_detokenize_roundtrip(model):
    r = run("tokenize", "--model", model, "Hello world! <|im_start|>")
    assert r.returncode == 0, r.stderr
    ids = json.loads(r.stdout)["ids"]
    assert 1 not in ids  # typed control-token text stays text
    r = run("detokenize", "--model", model, *ids)
    assert r.returncode == 0 and r.stdout == "Hello world! <|im_start|>\n"


def test_chat_reads_stdin(model):
    r = run("chat", "--model", model, "--temperature", "0", "--max-tokens", "24",
            input="What is the capital of France?\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout


def test_bad_model_files_one_clear_line(binary, tmp_path):
    missing = tmp_path / "nope.gguf"
    r = run("generate", "--model", missing, "--prompt", "x")
    assert r.returncode == 1 and str(missing) in r.stderr and len(r.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOTAGGUF" + b"\0" * 100)
    r = run("generate", "--model", bad, "--prompt", "x")
    assert r.returncode == 1 and str(bad) in r.stderr and len(r.stderr.strip().splitlines()) == 1
    if MODEL.exists():
        trunc = tmp_path / "trunc.gguf"
        with open(MODEL, "rb") as f:
            trunc.write_bytes(f.read(5_000_000))
        r = run("generate", "--model", trunc, "--prompt", "x")
        assert r.returncode == 1 and "trunc" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_kv_cache_larger_than_the_machine_is_one_clear_line(model):
    # The pool is mapped lazily, so without the check this would start and fail later, under load.
    r = run("generate", "--model", model, "--prompt", "x", "--max-tokens", "1", "--kv-cache-gb", "60000")
    assert r.returncode == 1, r.stderr
    assert "--kv-cache-gb" in r.stderr and "available" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_serve_roles_that_do_not_fit_the_model_are_clear_errors(binary, model):
    # A vision pool needs a multimodal model; the default model is text only.
    r = run("serve", "--role", "vision", "--model", model)
    assert r.returncode != 0 and "not a multimodal model" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_bench_prints_json(model):
    r = run("bench", "--model", model, "--mode", "decode", "--batch", "1,2", "--prompt-len", "16",
            "--gen-len", "8")
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["batch"] for x in recs] == [1, 2]
    for x in recs:
        for k in ("mode", "batch", "prompt_tokens", "tokens_per_s", "per_seq_tokens_per_s", "ttft_ms"):
            assert k in x
        assert x["tokens_per_s"] > 0


def test_bench_serve_and_tokenize_modes(model, tmp_path):
    # serve: the HTTP server measured from outside, concurrent streaming clients on loopback
    plot = tmp_path / "serve.svg"
    r = run("bench", "--model", model, "--mode", "serve", "--batch", "1,3", "--prompt-len", "16",
            "--gen-len", "6", "--threads", "2", "--plot", str(plot))
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["batch"] for x in recs] == [1, 3]
    for x in recs:
        assert x["mode"] == "serve" and x["prompt_tokens"] == 16
        for k in ("tokens_per_s", "per_seq_tokens_per_s", "ttft_ms", "ttft_ms_p99"):
            assert x[k] > 0, (k, x)
        # every client got gen_len tokens (ignore_eos): total = batch * 6 over the wall time
        assert abs(x["tokens_per_s"] * x["wall_ms"] / 1e3 - 6 * x["batch"]) < 0.01
    assert plot.read_text().startswith("<?xml") or "<svg" in plot.read_text()
    # tokenize: encode speed of mixed text
    r = run("bench", "--model", model, "--mode", "tokenize", "--megabytes", "1")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout.strip())
    assert rec["mode"] == "tokenize" and rec["batch"] == 1 and rec["prompt_tokens"] > 100000
    assert rec["tokens_per_s"] > 0 and rec["bytes"] >= 1 << 20
    r = run("bench", "--model", model, "--mode", "nonsense")
    assert r.returncode != 0 and "--mode 'nonsense'" in r.stderr


def test_structured_output_json_schema_validates(model, tmp_path):
    import jsonschema
    schema = {"type": "object",
              "properties": {"city": {"type": "string", "maxLength": 20},
                             "population": {"type": "integer", "minimum": 0, "maximum": 99999999}},
              "required": ["city", "population"], "additionalProperties": False}
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    for seed in range(3):
        r = run("generate", "--model", model, "--prompt", "Describe the biggest city of France as JSON.",
                "--json-schema", path, "--max-tokens", "64", "--temperature", "0.7", "--seed", seed,
                "--json")
        assert r.returncode == 0, r.stderr
        rec = json.loads(r.stdout)
        assert rec["finish_reason"] == "stop", rec
        jsonschema.validate(json.loads(rec["text"]), schema)


def test_structured_output_regex_and_bad_schema(model, tmp_path):
    r = run("generate", "--model", model, "--no-chat", "--prompt", "Today's date is",
            "--regex", "[0-9]{4}-[0-9]{2}-[0-9]{2}", "--max-tokens", "20", "--json")
    rec = json.loads(r.stdout)
    import re
    assert re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", rec["text"]), rec
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "object", "unevaluatedProperties": false}')
    r = run("generate", "--model", model, "--prompt", "x", "--json-schema", bad)
    assert r.returncode == 2 and "'unevaluatedProperties' at '/unevaluatedProperties'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_kv_store_survives_restart(model, tmp_path):
    dirs = []
    for name in "abc":
        dirs += ["--kv-store", tmp_path / name]
    prompt = "Background: " + "The river flows past the old mill and the stone bridge. " * 12 + "Question: what flows?"
    args = ["generate", "--model", model, "--prompt", prompt, "--max-tokens", "8", "--json", *dirs]
    first = json.loads(run(*args).stdout)
    second = json.loads(run(*args).stdout)  # a new process: only the store can supply the prefix
    assert first["usage"]["cached_tokens"] == 0
    assert second["usage"]["cached_tokens"] >= first["usage"]["prompt_tokens"] - 16
    assert second["token_ids"] == first["token_ids"]
    r = run("kvstore", "verify", *[tmp_path / n for n in "abc"])
    assert r.returncode == 0, r.stdout + r.stderr
    shutil.rmtree(tmp_path / "b")  # one target lost: entries still read back through parity
    third = json.loads(run(*args).stdout)
    assert third["usage"]["cached_tokens"] == second["usage"]["cached_tokens"]
    assert third["token_ids"] == first["token_ids"]


def test_kv_store_traffic_class_and_tier_bench(model, tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    flags = []
    for d in dirs:
        flags += ["--kv-store", d]
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"prompt": "alpha " * 40, "traffic_class": "chat"}) + "\n" +
                   json.dumps({"prompt": "beta " * 40}) + "\n")
    r = run("generate", "--model", model, "--input", inp, "--max-tokens", "2", "--traffic-class", "agent",
            *flags)
    assert r.returncode == 0, r.stderr
    stat = json.loads(run("kvstore", "stat", "--json", *dirs).stdout)
    assert stat["entries_by_class"]["agent"] > 0 and stat["entries_by_class"]["chat"] > 0, stat
    # A Llama cache has no sliding-window state: every entry is a KV block.
    assert stat["entries_by_kind"] == {"kv_block": stat["entries"], "swa_checkpoint": 0}, stat
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "x", "traffic_class": "forever"}) + "\n")
    r = run("generate", "--model", model, "--input", bad, *flags)
    assert r.returncode == 2 and "traffic_class" in r.stderr
    bad.write_text(json.dumps({"prompt": "x", "swa_restore": "sometimes"}) + "\n")
    r = run("generate", "--model", model, "--input", bad, *flags)
    assert r.returncode == 2 and "swa_restore" in r.stderr, r.stderr
    r = run("generate", "--model", model, "--prompt", "x", "--swa-restore", "fuzzy")
    assert r.returncode == 2 and "--swa-restore" in r.stderr, r.stderr
    r = run("generate", "--model", model, "--prompt", "x", "--kv-store-ram-gb", "1")
    assert r.returncode == 2 and "--kv-store" in r.stderr
    r = run("generate", "--model", model, "--prompt", "x", "--kv-store-capacity-gb", "1")
    assert r.returncode == 2 and "--kv-store-capacity-gb needs" in r.stderr
    # Time to first token per tier: the three hits supply every full block but the last token's.
    r = run("bench", "--model", model, "--mode", "kvstore", "--prompt-lens", "100", *flags)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["tier"] for x in recs] == ["cold", "engine_ram", "store_ram", "store_ssd"]
    assert all(x["mode"] == "kvstore" and x["batch"] == 1 and x["prompt_tokens"] == 100 for x in recs)
    assert recs[0]["cached_tokens"] == 0
    assert all(x["cached_tokens"] == 96 and x["ttft_ms"] > 0 for x in recs[1:]), recs
    assert sorted(p.name for p in tmp_path.joinpath("a").iterdir()) == ["kv1"]  # bench cleaned up


def test_out_of_range_sampling_field_in_input_is_a_usage_error(model, tmp_path):
    inp = tmp_path / "bad.jsonl"
    inp.write_text('{"prompt": "ok"}\n{"prompt": "x", "top_p": 5}\n')
    r = run("generate", "--model", model, "--input", inp)
    assert r.returncode == 2 and "bad.jsonl:2" in r.stderr and "top_p must be in (0, 1], got 5" in r.stderr
    assert r.stdout == ""
