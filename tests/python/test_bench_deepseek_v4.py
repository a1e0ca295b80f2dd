"""`deepinfer bench` on DeepSeek-V4 (the tiny fixture h2_mixed: window, HCA and CSA layers): each
record's forward_share splits the measured forward time into V4's parts (attention,
compressor/indexer, MoE, mHC, head and the rest), every part present and the shares summing to
one, in prefill and in decode."""
import json
import shutil

import pytest

from byte_tokenizer import write_byte_tokenizer
from conftest import ROOT, run

PARTS = {"attention", "compressor_indexer", "moe", "mhc", "head", "rest"}


@pytest.fixture(scope="module")
def v4_dir(tmp_path_factory, binary):
    out = tmp_path_factory.mktemp("v4_bench") / "h2_mixed"
    shutil.copytree(ROOT / "tests/reference/fixtures/deepseek_v4/h2_mixed", out)
    write_byte_tokenizer(out)
    return out


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_forward_share_has_every_v4_part(v4_dir, mode):
    r = run("bench", "--model", v4_dir, "--mode", mode, "--prompt-len", "40", "--gen-len", "6", "--batch", "1,3",
            "--threads", "1")
    assert r.returncode == 0, r.stderr
    records = [json.loads(x) for x in r.stdout.strip().splitlines()]
    assert len(records) == 2
    for rec in records:
        share = rec["forward_share"]
        assert set(share) == PARTS, rec
        assert all(0 <= v <= 1 for v in share.values()) and sum(share.values()) == pytest.approx(1.0, abs=1e-6)
        # 40 tokens cross CSA and HCA windows: every part does work.
        assert all(share[p] > 0 for p in PARTS - {"rest"}), rec


def test_prefix_restore_bench_replays_a_bounded_window(v4_dir):
    """bench --mode prefix-restore: the bounded restore replays recent_tokens tokens (h2_mixed:
    window 4, HCA 8, so 8) of a hit kept whole; exact without rows computes everything; exact
    with rows held restores the whole prompt; the summary lines (per length, over all prompts)
    report the drift; --context-baseline adds the drift of a one-token change before the
    replayed span."""
    r = run("bench", "--model", v4_dir, "--mode", "prefix-restore", "--prompt-lens", "64",
            "--gen-len", "4", "--repeat", "2", "--threads", "1", "--context-baseline")
    assert r.returncode == 0, r.stderr
    records = [json.loads(x) for x in r.stdout.strip().splitlines()]
    rows = [x for x in records if not x.get("summary")]
    summary = [x for x in records if x.get("summary") is True]
    overall = [x for x in records if x.get("summary") == "all"]
    assert len(rows) == 2 and len(summary) == 1 and len(overall) == 1
    for rec in rows:
        assert rec["bounded_replayed_tokens"] == 8, rec
        assert rec["bounded_cached_tokens"] == 64, rec  # the whole prefix, replay included
        assert rec["full_cached_tokens"] == 0, rec
        assert rec["exact_cached_tokens"] >= 64, rec
        assert 0 <= rec["greedy_agreement"] <= 1 and rec["mean_top20_kl"] >= 0
        assert 0 < rec["ref_top1_prob"] <= rec["ref_top20_mass"] <= 1.0001, rec
        assert 0 <= rec["context_changed_agreement"] <= 1, rec
        assert rec["context_changed_mean_top20_kl"] >= 0, rec
        # The TTFT split: forward passes (with the model's parts) plus the rest, for each run.
        for run_name in ("bounded", "full", "exact_restore"):
            fwd, other = rec[f"{run_name}_forward_ms"], rec[f"{run_name}_other_ms"]
            assert fwd > 0 and other >= 0, rec
            assert abs(fwd + other - rec[f"{run_name}_ttft_ms"]) < 1e-6, rec
            parts = sum(rec[f"{run_name}_{p}_ms"] for p in
                        ("attention", "compressor_indexer", "moe", "mhc", "head"))
            assert 0 < parts <= fwd * 1.001, rec
    for run_name in ("bounded", "full", "exact_restore"):
        assert summary[0][f"{run_name}_forward_ms"] > 0, summary[0]
    assert 0 <= summary[0]["greedy_agreement"] <= 1
    assert overall[0]["prompts"] == 2 and overall[0]["max_top20_kl"] >= overall[0]["mean_top20_kl"]
    assert 0 <= overall[0]["context_changed_agreement"] <= 1


def test_prefix_restore_bench_refuses_a_model_without_window_state(binary):
    r = run("bench", "--mode", "prefix-restore", "--prompt-lens", "64", "--threads", "1")
    assert r.returncode != 0
    assert "prefix-restore" in r.stderr and "DeepSeek-V4" in r.stderr, r.stderr
