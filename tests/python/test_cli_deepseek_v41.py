"""`deepinfer generate --model DIR` on the tiny DeepSeek-V4.1 fixture (made by
tests/reference/make_tiny_deepseek_v41.py), given a 128-token byte-level tokenizer written at test
time: greedy tokens equal the reference's continuation; a broken checkpoint (config roles, FP8
block edge) exits 1 with one line naming it and the problem."""
import json
import shutil

import pytest

from byte_tokenizer import write_byte_tokenizer
from conftest import ROOT, run

FIXTURE = ROOT / "tests/reference/fixtures/deepseek_v41/tiny"


def model_dir(tmp_path):
    out = tmp_path / "v41"
    shutil.copytree(FIXTURE, out)
    (out / "expected.json").unlink()
    write_byte_tokenizer(out)
    return out


def test_generate_greedy_matches_the_reference(binary, tmp_path):
    expected = json.loads((FIXTURE / "expected.json").read_text())
    d = model_dir(tmp_path)
    lines = [json.dumps({"prompt_token_ids": c["ids"]}) for c in expected["cases"]]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    r = run("generate", "--model", d, "--input", tmp_path / "in.jsonl", "--max-tokens", "8", "--temperature", "0",
            "--ignore-eos", "--json", "--threads", "1")
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in r.stdout.strip().splitlines()]
    assert [rec["token_ids"] for rec in records] == [c["greedy"] for c in expected["cases"]]


@pytest.mark.parametrize("edit, needle", [
    (lambda c: c["text_config"].update(kv_source_layer_ids=[3, 5]), "no KV source"),
    (lambda c: c["quantization_config"].update(weight_block_size=[64, 64]), "weight_block_size"),
])
def test_v41_checkpoint_exits_1_with_one_line(binary, tmp_path, edit, needle):
    d = model_dir(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    edit(cfg)
    (d / "config.json").write_text(json.dumps(cfg))
    r = run("generate", "--model", d, "--prompt", "hi", "--max-tokens", "2")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "DeepSeek-V4.1" in lines[0] and str(d) in lines[0], r.stderr
