"""Expert parallelism on the tiny DeepSeek-V4 fixtures (docs/parallel.md): `generate --ep 2`
gives EP=1's greedy tokens, and in batch-invariant mode its tokens and logprobs bit for bit, on
every fixture (hash-routed layers; bf16, FP8 and FP4 experts); `serve --ep 2` answers as `serve`
without EP (bitwise in batch-invariant mode), also with redundant replicas placed and moved by
live EPLB; a rank count that does not divide V4's experts is refused in one line."""
import json
import shutil

import pytest

from byte_tokenizer import write_byte_tokenizer
from conftest import IN_CI, ROOT, run
from test_serve_ep import EpServer

FIXTURES = ROOT / "tests/reference/fixtures/deepseek_v4"
NAMES = ["h2_mixed", "h4_deepseek", "h2_hfnames", "fp8_ue8m0", "fp4_e2m1"]
PROMPTS = [[1, 17, 42, 55, 9], [100, 3, 3, 3, 99, 12, 7, 64, 31], [9, 8, 7], [40, 41, 42, 43, 44, 45, 46],
           [5, 6], [120, 60, 30, 15, 7]]


@pytest.fixture(scope="module")
def mpi(binary):
    if shutil.which("mpirun") is None:
        if IN_CI:
            pytest.fail("mpirun is missing (scripts/install_deps.sh installs openmpi-bin)")
        pytest.skip("mpirun is not installed")


def model_dir(tmp_path, name):
    d = tmp_path / name
    shutil.copytree(FIXTURES / name, d)
    (d / "expected.json").unlink()
    write_byte_tokenizer(d)
    return d


def generate(model, inp, *extra):
    r = run("generate", "--model", model, "--input", inp, "--json", "--threads", "1", "--max-num-seqs", "4",
            "--ignore-eos", *extra, timeout=300)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def write_input(path, max_tokens=8):
    path.write_text("".join(json.dumps({"prompt_token_ids": p, "max_tokens": max_tokens, "logprobs": 2}) + "\n"
                            for p in PROMPTS))
    return path


@pytest.mark.parametrize("name", NAMES)
def test_ep2_equals_ep1_bitwise_in_batch_invariant_mode(tmp_path, mpi, name):
    d = model_dir(tmp_path, name)
    inp = write_input(tmp_path / "in.jsonl")
    one = generate(d, inp, "--batch-invariant")
    two = generate(d, inp, "--batch-invariant", "--ep", "2")  # starts mpirun -n 2 itself
    assert [r["index"] for r in two] == list(range(len(PROMPTS)))
    for a, b in zip(one, two):
        assert a["token_ids"] == b["token_ids"] and len(a["token_ids"]) == 8
        assert a["logprobs"] == b["logprobs"]  # JSON floats: equal text = equal bits


def test_ep2_greedy_tokens_equal_ep1(tmp_path, mpi):
    d = model_dir(tmp_path, "h2_mixed")
    inp = write_input(tmp_path / "in.jsonl")
    assert [r["token_ids"] for r in generate(d, inp, "--ep", "2")] == [r["token_ids"] for r in generate(d, inp)]


def test_rank_count_not_dividing_the_experts_is_refused_in_one_line(tmp_path, mpi):
    d = model_dir(tmp_path, "h2_mixed")
    inp = write_input(tmp_path / "in.jsonl")
    r = run("generate", "--model", d, "--input", inp, "--ep", "3")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "4 routed experts do not divide over 3 ranks" in r.stderr


def completions(server):
    out = []
    for i, p in enumerate(["hello there", "abc abc abc", "the quick brown fox", "x"]):
        c = server.client.completions.create(model="m", prompt=p, max_tokens=8, temperature=0, logprobs=2,
                                             extra_body={"ignore_eos": True})
        out.append((c.choices[0].text, c.choices[0].logprobs.token_logprobs))
    return out


def test_serve_ep2_equals_serve_bitwise_in_batch_invariant_mode(tmp_path, mpi):
    d = model_dir(tmp_path, "h2_mixed")
    one = EpServer(d, "--batch-invariant")
    try:
        expected = completions(one)
    finally:
        one.stop()
    two = EpServer(d, "--batch-invariant", "--ep", "2")
    try:
        assert completions(two) == expected  # floats compared exactly
        m = two.metrics()
        assert m["deepinfer_ep_ranks"] == 2
        assert all(m[f'deepinfer_ep_rank_moe_rows_total{{rank="{r}"}}'] > 0 for r in (0, 1)), m
    finally:
        assert two.stop() == 0, two.output()
    # Redundant replicas, placed and moved by live EPLB every 4 busy steps.
    three = EpServer(d, "--batch-invariant", "--ep", "2", "--redundant", "2", "--eplb-interval", "4",
                     "--eplb-window", "4")
    try:
        assert completions(three) == expected
        assert completions(three) == expected
        m = three.metrics()  # the placement moved (experts read) while answering the same
        assert m["deepinfer_ep_rebalances_total"] >= 1 and m["deepinfer_ep_rebalance_failures_total"] == 0, m
        assert m["deepinfer_ep_rebalance_experts_loaded_total"] >= 1, m
    finally:
        assert three.stop() == 0, three.output()
