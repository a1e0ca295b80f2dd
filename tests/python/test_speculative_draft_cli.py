"""The draft-model drafter through the CLI: the default model drafting for itself gives the same
text as without speculation and accepts nearly every draft (batch 8 and 1); a disagreeing draft
model (tiny_qwen2 drafting for tiny_llama, same byte vocabulary) gives the same text too; the
flags show in every command's --help; refusals are one line with the documented exit status."""
import json
import shutil

import pytest

from byte_tokenizer import write_byte_tokenizer
from conftest import ROOT, run
from test_speculative_cli import PROMPTS, generate_jsonl

FIXTURES = ROOT / "tests" / "reference" / "fixtures"


def spec_stats(stderr):
    line = next(l for l in stderr.splitlines() if "speculative:" in l)
    verified = int(line.split(" drafted, ")[1].split(" verified")[0])
    accepted = int(line.split(" verified, ")[1].split(" accepted")[0])
    return verified, accepted


def test_self_drafting_same_text_and_nearly_all_accepted(model, tmp_path):
    lines = [{"prompt": p} for p in PROMPTS]
    want, _ = generate_jsonl(model, tmp_path, lines, "--max-num-seqs", "8")
    for policy in ["fixed", "dspark"]:
        got, stats = generate_jsonl(model, tmp_path, lines, "--max-num-seqs", "8", "--speculative", "draft",
                                    "--draft-model", model, "--spec-policy", policy)
        assert [w["text"] for w in want] == [g["text"] for g in got], policy
        assert [w["token_ids"] for w in want] == [g["token_ids"] for g in got], policy
        verified, accepted = spec_stats(stats)
        # The same weights draft the target's own greedy tokens: in batch-invariant mode every
        # one is accepted (a drafter that lost track of a sequence would draft other tokens).
        assert verified > 100 and accepted >= 0.95 * verified, stats
    single, stats = generate_jsonl(model, tmp_path, lines[1:2], "--max-num-seqs", "1", "--speculative", "draft",
                                   "--draft-model", model, "--num-draft-tokens", "6")
    assert single[0]["text"] == want[1]["text"]
    verified, accepted = spec_stats(stats)
    assert accepted >= 0.95 * verified, stats


def tiny_model(tmp_path, name):
    d = tmp_path / name
    shutil.copytree(FIXTURES / name, d)
    write_byte_tokenizer(d, size=256)
    return d


def test_disagreeing_draft_model_same_tokens(binary, tmp_path):
    target, draft = tiny_model(tmp_path, "tiny_llama"), tiny_model(tmp_path, "tiny_qwen2")
    lines = [{"prompt_token_ids": [1] + [40 + (j * 7 + i) % 60 for j in range(10 + i)], "max_tokens": 24}
             for i in range(6)]
    lines.append({"prompt_token_ids": [1, 50, 51, 52], "max_tokens": 24, "temperature": 0.9, "seed": 5})
    flags = ["--max-num-seqs", "8"]
    want, _ = generate_jsonl(target, tmp_path, lines, *flags)
    got, stats = generate_jsonl(target, tmp_path, lines, *flags, "--speculative", "draft", "--draft-model", draft)
    assert [w["token_ids"] for w in want] == [g["token_ids"] for g in got]
    verified, accepted = spec_stats(stats)
    assert verified - accepted > 20, stats  # rejected drafts: the draft model's KV was rolled back
    again, _ = generate_jsonl(target, tmp_path, lines, *flags, "--speculative", "draft", "--draft-model", draft)
    assert [g["token_ids"] for g in got] == [a["token_ids"] for a in again]  # the seed reproduces


@pytest.mark.parametrize("command", ["generate", "serve", "chat", "bench"])
def test_flags_in_every_help(binary, command):
    r = run(command, "--help")
    assert r.returncode == 0
    assert "--draft-model" in r.stdout and "--speculative" in r.stdout, r.stdout


@pytest.mark.parametrize("flags, needle", [
    (["--speculative", "draft"], "--speculative draft needs --draft-model"),
    (["--draft-model", "x.gguf"], "--draft-model x.gguf: needs --speculative draft"),
    (["--speculative", "ngram", "--draft-model", "x.gguf"], "--draft-model x.gguf: needs --speculative draft"),
])
def test_draft_flag_misuse_exits_2(model, flags, needle):
    r = run("generate", "--model", model, "--prompt", "hi", "--max-tokens", "2", *flags)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_unloadable_draft_model_exits_1_naming_it(model, tmp_path):
    missing = tmp_path / "missing-draft.gguf"
    r = run("generate", "--model", model, "--prompt", "hi", "--max-tokens", "2", "--speculative", "draft",
            "--draft-model", missing)
    assert r.returncode == 1, r.stderr
    assert str(missing) in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(model.read_bytes()[:4096])
    r = run("generate", "--model", model, "--prompt", "hi", "--max-tokens", "2", "--speculative", "draft",
            "--draft-model", bad)
    assert r.returncode == 1 and str(bad) in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_other_vocabulary_exits_1_naming_both(model, tmp_path):
    draft = tiny_model(tmp_path, "tiny_llama")  # a 256-token byte vocabulary
    r = run("generate", "--model", model, "--prompt", "hi", "--max-tokens", "2", "--speculative", "draft",
            "--draft-model", draft)
    assert r.returncode == 1, r.stderr
    assert str(draft) in r.stderr and str(model) in r.stderr, r.stderr
    assert "vocabulary" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_bench_spec_chat_rows(model):
    r = run("bench", "--mode", "spec", "--model", model, "--spec-task", "chat", "--batch", "2", "--gen-len", "16",
            "--threads", "2", "--num-draft-tokens", "3", timeout=600)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    assert [row["config"] for row in rows] == ["off", "fixed", "dspark"]
    assert all(row["task"] == "chat" and row["batch"] == 2 for row in rows)
    assert rows[1]["drafter"] == "draft" and rows[1]["draft_model"] == str(model)
    assert rows[1]["acceptance_rate"] > 0.8, rows[1]
    assert len({row["generated_tokens"] for row in rows}) == 1  # the same tokens every way
    r = run("bench", "--mode", "spec", "--model", model, "--spec-task", "poetry")
    assert r.returncode == 2 and "--spec-task poetry" in r.stderr


def test_serve_with_a_draft_model(model):
    from server_util import Server, post_json
    body = {"model": "m", "messages": [{"role": "user", "content": "Why is the sky blue?"}],
            "max_tokens": 32, "temperature": 0}
    texts = []
    for extra in [(), ("--speculative", "draft", "--draft-model", model)]:
        server = Server(model, "--threads", "2", "--batch-invariant", "--served-model-name", "m", *extra)
        try:
            status, reply = post_json(server, "/v1/chat/completions", body)
            assert status == 200, reply
            texts.append(reply["choices"][0]["message"]["content"])
            if extra:
                m = server.metrics()
                assert m["deepinfer_spec_accepted_tokens_total"] > 0, m
        finally:
            server.stop()
    assert texts[0] == texts[1]
