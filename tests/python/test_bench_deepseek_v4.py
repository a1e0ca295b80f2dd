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
