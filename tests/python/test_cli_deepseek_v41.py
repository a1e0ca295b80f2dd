"""`deepinfer generate --model DIR` on the tiny DeepSeek-V4.1 fixture (made by
tests/reference/make_tiny_deepseek_v41.py): until the V4.1 forward is built, the checkpoint is
refused with exit 1 and one line naming it, after its config and Engram layout are checked (a
broken layout is named instead)."""
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


@pytest.mark.parametrize("edit, needle", [
    (None, "not built yet"),
    (lambda c: c["text_config"].update(kv_source_layer_ids=[3, 5]), "no KV source"),
    (lambda c: c["quantization_config"].update(weight_block_size=[64, 64]), "weight_block_size"),
])
def test_v41_checkpoint_exits_1_with_one_line(binary, tmp_path, edit, needle):
    d = model_dir(tmp_path)
    if edit:
        cfg = json.loads((d / "config.json").read_text())
        edit(cfg)
        (d / "config.json").write_text(json.dumps(cfg))
    r = run("generate", "--model", d, "--prompt", "hi", "--max-tokens", "2")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "DeepSeek-V4.1" in lines[0] and str(d) in lines[0], r.stderr
