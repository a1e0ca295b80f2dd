"""Expert parallelism over MPI (`generate --ep N`) on the tiny random DeepSeek-V3 fixtures:
greedy tokens and logprobs equal EP=1 bit for bit in batch-invariant mode, rank counts that do
not divide the experts refused in one line; and the expert trace -> `eplb plan` path with its
errors (docs/parallel.md)."""
import json
import os
import shutil

import pytest

from byte_tokenizer import write_byte_tokenizer
from conftest import IN_CI, ROOT, run

FIXTURES = ROOT / "tests/reference/fixtures/deepseek_v3"
PROMPTS = [[1, 17, 42, 55, 9], [100, 3, 3, 3, 99, 12, 7, 64, 31], [9, 8, 7], [40, 41, 42, 43, 44, 45, 46],
           [5, 6], [120, 60, 30, 15, 7]]


def model_dir(tmp_path, name):
    d = tmp_path / name
    shutil.copytree(FIXTURES / name, d)
    write_byte_tokenizer(d)
    return d


def write_input(path, max_tokens=8):
    path.write_text("".join(json.dumps({"prompt_token_ids": p, "max_tokens": max_tokens, "logprobs": 2}) + "\n"
                            for p in PROMPTS))
    return path


def generate(model, inp, *extra, env=None):
    r = run("generate", "--model", model, "--input", inp, "--json", "--threads", "1", "--batch-invariant",
            "--max-num-seqs", "4", *extra, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


@pytest.fixture(scope="module")
def mpi(binary):
    if shutil.which("mpirun") is None:
        if IN_CI:
            pytest.fail("mpirun is missing (scripts/install_deps.sh installs openmpi-bin)")
        pytest.skip("mpirun is not installed")


@pytest.mark.parametrize("name", ["dense_heavy", "moe_yarn"])
def test_ep2_equals_ep1_bitwise_in_batch_invariant_mode(tmp_path, mpi, name):
    d = model_dir(tmp_path, name)
    inp = write_input(tmp_path / "in.jsonl")
    one = generate(d, inp)
    two = generate(d, inp, "--ep", "2")  # starts mpirun -n 2 itself
    assert [r["index"] for r in two] == list(range(len(PROMPTS)))
    for a, b in zip(one, two):
        assert a["token_ids"] == b["token_ids"] and len(a["token_ids"]) == 8
        assert a["logprobs"] == b["logprobs"]  # JSON floats: equal text = equal bits


def test_ep2_under_mpirun_and_with_eplb_replicas(tmp_path, mpi):
    d = model_dir(tmp_path, "dense_heavy")
    inp = write_input(tmp_path / "in.jsonl", max_tokens=6)
    trace = tmp_path / "trace.json"
    one = generate(d, inp, "--expert-trace", trace, env=dict(os.environ, DEEPINFER_ROUTER_ZIPF="0.2"))
    # Started by mpirun directly, experts placed by EPLB with 4 redundant replicas.
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               DEEPINFER_ROUTER_ZIPF="0.2")
    import subprocess
    from conftest import BINARY
    r = subprocess.run(["mpirun", "-n", "2", "--oversubscribe", "--bind-to", "none",
                        "--mca", "btl_vader_single_copy_mechanism", "none", str(BINARY), "generate",
                        "--model", str(d), "--input", str(inp), "--json", "--threads", "1", "--batch-invariant",
                        "--ep", "2", "--eplb-trace", str(trace), "--ep-redundant", "4"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    two = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["token_ids"] for x in two] == [x["token_ids"] for x in one]
    assert [x["logprobs"] for x in two] == [x["logprobs"] for x in one]


def test_rank_count_not_dividing_the_experts_is_refused_in_one_line(tmp_path, mpi):
    d = model_dir(tmp_path, "dense_heavy")
    inp = write_input(tmp_path / "in.jsonl")
    r = run("generate", "--model", d, "--input", inp, "--ep", "3")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "16 routed experts do not divide over 3 ranks" in r.stderr
    # Replicas offline need a trace to place them (only serve places them live).
    r = run("generate", "--model", d, "--input", inp, "--ep", "2", "--ep-redundant", "2")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "needs --eplb-trace" in r.stderr


def test_expert_trace_and_planner(tmp_path):
    d = model_dir(tmp_path, "dense_heavy")
    inp = write_input(tmp_path / "in.jsonl")
    trace = tmp_path / "trace.json"
    generate(d, inp, "--expert-trace", trace, "--expert-trace-window", "2",
             env=dict(os.environ, DEEPINFER_ROUTER_ZIPF="0.3"))
    t = json.loads(trace.read_text())
    assert t["num_experts"] == 16 and t["num_groups"] == 2 and t["layers"] == [2]
    # every token of every forward is routed to top-4 experts of the one MoE layer
    assert sum(t["total"][0]) % 4 == 0 and sum(t["total"][0]) > 0
    assert len(t["windows"]) >= 2
    r = run("eplb", "plan", "--trace", trace, "--ep", "2,4,8", "--redundant", "0,4,8", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["ep"] for x in rows] == [2, 4, 8]
    for x in rows:
        assert x["eplb_max_over_mean"] >= 1.0 and x["static_max_over_mean"] >= x["eplb_max_over_mean"] - 1e-9
    assert rows[2]["eplb_max_over_mean"] < rows[2]["static_max_over_mean"]  # replicas help the skewed load


def test_planner_errors(tmp_path):
    r = run("eplb", "plan", "--trace", tmp_path / "missing.json", "--ep", "4")
    assert r.returncode == 1 and "missing.json" in r.stderr and r.stderr.count("\n") == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    r = run("eplb", "plan", "--trace", bad, "--ep", "4")
    assert r.returncode == 1 and "not valid JSON" in r.stderr
    good = tmp_path / "t.json"
    good.write_text(json.dumps({"format": "deepinfer-expert-trace", "num_experts": 8, "num_groups": 1,
                                "layers": [1], "total": [[1, 2, 3, 4, 5, 6, 7, 8]]}))
    r = run("eplb", "plan", "--trace", good, "--ep", "3")
    assert r.returncode == 2 and "--ep 3 does not divide 8 physical experts" in r.stderr
    r = run("eplb", "plan", "--ep", "4")
    assert r.returncode == 2
    r = run("eplb", "plan", "--help")
    assert r.returncode == 0 and "--redundant" in r.stdout


def test_ep2_shares_the_kv_store_across_runs(tmp_path, mpi):
    """Both ranks write their sequences' blocks to one --kv-store; a second `generate --ep 2`
    process restores the prompts from it (cached tokens reported) with bitwise-equal logprobs."""
    d = model_dir(tmp_path, "moe_yarn")
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"prompt_token_ids": list(range(start, start + n)), "max_tokens": 6,
                                       "logprobs": 2}) + "\n" for start, n in ((2, 58), (5, 65))))
    store = tmp_path / "store"
    first = generate(d, inp, "--ep", "2", "--kv-store", store)
    second = generate(d, inp, "--ep", "2", "--kv-store", store)
    assert [r["usage"]["cached_tokens"] for r in first] == [0, 0]
    assert all(r["usage"]["cached_tokens"] >= 32 for r in second), second
    assert [(r["token_ids"], r["logprobs"]) for r in first] == [(r["token_ids"], r["logprobs"]) for r in second]
