"""`deepinfer generate --model DIR` end to end on the tiny DeepSeek-V4 fixtures (made by
tests/reference/make_tiny_deepseek_v4.py), given a 128-token byte-level tokenizer written at
test time: greedy tokens equal transformers' continuation; broken checkpoints exit 1 with one
line naming the file and the field or tensor."""
import json
import shutil

import pytest

from byte_tokenizer import write_byte_tokenizer
from conftest import ROOT, run

FIXTURES = ROOT / "tests/reference/fixtures/deepseek_v4"


def model_dir(tmp_path, name):
    out = tmp_path / name
    shutil.copytree(FIXTURES / name, out)
    (out / "expected.json").unlink()
    write_byte_tokenizer(out)
    return out


@pytest.mark.parametrize("name", ["h2_mixed", "h4_deepseek", "h2_hfnames", "fp8_ue8m0"])
def test_generate_greedy_matches_transformers(binary, tmp_path, name):
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    d = model_dir(tmp_path, name)
    lines = [json.dumps({"prompt_token_ids": c["ids"]}) for c in expected["cases"]]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    r = run("generate", "--model", d, "--input", tmp_path / "in.jsonl", "--max-tokens", "8", "--temperature", "0",
            "--ignore-eos", "--json", "--threads", "1")
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in r.stdout.strip().splitlines()]
    assert [rec["token_ids"] for rec in records] == [c["greedy"] for c in expected["cases"]]


@pytest.mark.parametrize("edit, needle", [
    (lambda c: c.update(quantization_config={"quant_method": "awq"}), "quantization_config"),
    (lambda c: c["layer_types"].__setitem__(0, "compressed_sparse_attention"), "layers.0.attn.compressor.wkv.weight"),
    (lambda c: c.update(q_lora_rank=24), "layers.0.attn.wq_a.weight"),
    (lambda c: c.update(model_type="deepseek_v41"), "deepseek_v41"),
    (lambda c: c.update(rms_norm_eps=-1), "rms_norm_eps"),
    (lambda c: c.update(hc_sinkhorn_iters=100000000), "hc_sinkhorn_iters"),
])
def test_broken_checkpoint_exits_1_with_one_line(binary, tmp_path, edit, needle):
    d = model_dir(tmp_path, "h2_mixed")
    cfg = json.loads((d / "config.json").read_text())
    edit(cfg)
    (d / "config.json").write_text(json.dumps(cfg))
    r = run("generate", "--model", d, "--prompt", "hi", "--max-tokens", "2")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and str(d) in lines[0], r.stderr
