"""`deepinfer bench --mode kv-transfer`: one JSON line per message size with the transport's GB/s,
ucx_perftest's figure and the ratio when ucx_perftest is on PATH, and a plain note when not."""
import json
import shutil

import pytest

from conftest import run

SIZES = [65536, 1048576]


def records(stdout):
    return [json.loads(line) for line in stdout.strip().splitlines()]


def check_own_figures(recs, repeat=1):
    assert [r["message_bytes"] for r in recs] == [s for s in SIZES for _ in range(repeat)]
    for r in recs:
        assert r["mode"] == "kv-transfer" and r["messages"] == 20
        assert 0.001 < r["gb_per_s"] < 1000


@pytest.mark.skipif(shutil.which("ucx_perftest") is None, reason="ucx_perftest is not installed (ucx-utils)")
def test_kv_transfer_mode_measures_each_size_next_to_ucx_perftest(binary):
    r = run("bench", "--mode", "kv-transfer", "--transfer-bytes", ",".join(map(str, SIZES)),
            "--transfer-messages", "20", timeout=240)
    assert r.returncode == 0, r.stderr
    recs = records(r.stdout)
    check_own_figures(recs)
    for x in recs:
        assert "perftest" not in x, x  # no error note: ucx_perftest ran
        assert 0.001 < x["perftest_gb_per_s"] < 1000
        assert x["ratio_to_perftest"] == pytest.approx(x["gb_per_s"] / x["perftest_gb_per_s"], rel=1e-9)


def test_kv_transfer_mode_says_when_ucx_perftest_is_missing(binary, tmp_path):
    # An empty PATH: the transport is measured (twice per size here), the comparison is named
    # as missing.
    r = run("bench", "--mode", "kv-transfer", "--transfer-bytes", ",".join(map(str, SIZES)),
            "--transfer-messages", "20", "--repeat", "2", env={"PATH": str(tmp_path)}, timeout=240)
    assert r.returncode == 0, r.stderr
    recs = records(r.stdout)
    check_own_figures(recs, repeat=2)
    for x in recs:
        assert x["perftest"] == "ucx_perftest not found on PATH"
        assert "perftest_gb_per_s" not in x and "ratio_to_perftest" not in x


def test_kv_transfer_mode_rejects_a_bad_size(binary):
    r = run("bench", "--mode", "kv-transfer", "--transfer-bytes", "4096,x")
    assert r.returncode == 2
    assert "--transfer-bytes" in r.stderr and "'x'" in r.stderr
