"""Live EPLB in `deepinfer serve --ep 2` (docs/parallel.md): with routing skewed on purpose
(DEEPINFER_ROUTER_ZIPF), 64 concurrent streaming requests through the `openai` SDK while the
server rebalances (a new placement is staged on both ranks, expert weights are read from the
checkpoint, and every rank switches at one step boundary): no request fails, and every output
equals that of the same server with rebalancing off (greedy)."""
import concurrent.futures

import pytest

from conftest import run
from test_serve_ep import EpServer, model_dir  # noqa: F401 (model_dir is a fixture)

STREAMS = 64


def stream_one(client, i):
    chunks = client.completions.create(model="m", prompt=f"stream {i}: count the {i % 7} sheep", max_tokens=20,
                                       temperature=0, stream=True, extra_body={"ignore_eos": True})
    text, finish = "", None
    for c in chunks:
        if c.choices:
            text += c.choices[0].text
            finish = c.choices[0].finish_reason or finish
    return text, finish


def load_test(server):
    """64 streams at once; every result (a failure raises)."""
    with concurrent.futures.ThreadPoolExecutor(STREAMS) as pool:
        futures = [pool.submit(stream_one, server.client, i) for i in range(STREAMS)]
        return [f.result(timeout=120) for f in futures]


def test_rebalance_during_64_streams_fails_nothing_and_changes_no_output(model_dir, monkeypatch):  # noqa: F811
    monkeypatch.setenv("DEEPINFER_ROUTER_ZIPF", "1.5")
    common = ["--ep", "2", "--max-num-seqs", "64"]
    fixed = EpServer(model_dir, *common)  # contiguous experts, never rebalanced
    try:
        expected = load_test(fixed)
        m = fixed.metrics()
        assert m["deepinfer_ep_rebalances_total"] == 0
    finally:
        assert fixed.stop() == 0, fixed.output()
    assert all(finish == "length" for _, finish in expected)

    # 2 replicas, placed for even load at start, then by live EPLB every 6 busy steps.
    live = EpServer(model_dir, *common, "--redundant", "2", "--eplb-interval", "6", "--eplb-window", "8")
    try:
        assert live.metrics()["deepinfer_ep_rebalances_total"] == 0
        got = load_test(live)
        m = live.metrics()
        # The placement changed while the streams ran (busy steps only happen with requests in
        # flight), the new experts' weights were read on the ranks, and EPLB's plan is more even
        # than the skewed window it replaced.
        assert m["deepinfer_ep_rebalances_total"] >= 1, live.output()
        assert m["deepinfer_ep_placement_epoch"] >= 1
        assert m["deepinfer_ep_rebalance_experts_loaded_total"] >= 1
        assert m["deepinfer_ep_rebalance_failures_total"] == 0
        before = m["deepinfer_ep_moe_layer_imbalance_before_rebalance"]
        assert 1.0 < before and 1.0 <= m["deepinfer_ep_moe_layer_imbalance_planned"] < before, m
        assert m["deepinfer_aborted_requests_total"] == 0
        assert got == expected
    finally:
        assert live.stop() == 0, live.output()


def test_eplb_interval_without_ep_is_refused_in_one_line(model_dir):  # noqa: F811
    r = run("serve", "--model", model_dir, "--eplb-interval", "5")
    assert r.returncode == 2
    assert r.stderr.strip() == "deepinfer: serve: --eplb-interval needs --ep N (N > 1)"
