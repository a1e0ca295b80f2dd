"""A model that produces NaN logits ends the affected requests with an error, never the
process: `deepinfer generate` on copies of the tiny Llama fixture with NaN weights exits 1 with
one line naming the non-finite logits, with overlap scheduling on and off, and the requests
whose logits are finite in the same batch still get their tokens."""
import json
import shutil
import sys

import pytest

from conftest import ROOT, run

sys.path.insert(0, str(ROOT / "tests/python"))
from safetensors_util import read_safetensors, write_safetensors  # noqa: E402
from byte_tokenizer import write_byte_tokenizer  # noqa: E402

FIXTURE = ROOT / "tests/reference/fixtures/tiny_llama"
BF16_NAN = b"\xc0\x7f"


def broken_copy(tmp_path, tensor, rows=None):
    """The fixture with `tensor` (or only its `rows`) set to NaN, plus a byte tokenizer."""
    out = tmp_path / "model"
    out.mkdir()
    shutil.copy(FIXTURE / "config.json", out)
    tensors = read_safetensors(FIXTURE / "model.safetensors")
    meta, blob = tensors[tensor]
    if rows is None:
        blob = BF16_NAN * (len(blob) // 2)
    else:
        row_bytes = meta["shape"][1] * 2
        blob = bytearray(blob)
        for r in rows:
            blob[r * row_bytes:(r + 1) * row_bytes] = BF16_NAN * (row_bytes // 2)
        blob = bytes(blob)
    tensors[tensor] = (meta, blob)
    write_safetensors(out / "model.safetensors", tensors)
    write_byte_tokenizer(out, size=256)
    return out


@pytest.mark.parametrize("overlap", ["off", "on"])
def test_nan_logits_exit_1_with_one_line(binary, tmp_path, overlap):
    d = broken_copy(tmp_path, "model.norm.weight")
    r = run("generate", "--model", d, "--prompt", "hi", "--max-tokens", "4", "--overlap", overlap,
            "--threads", "1")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "non-finite logits" in lines[0], r.stderr


@pytest.mark.parametrize("overlap", ["off", "on"])
def test_nan_logits_end_only_the_affected_request(binary, tmp_path, overlap):
    # Token 200's embedding is NaN: only a prompt holding it gets non-finite logits.
    d = broken_copy(tmp_path, "model.embed_tokens.weight", rows=[200])
    (tmp_path / "in.jsonl").write_text(
        "\n".join(json.dumps({"prompt_token_ids": ids}) for ids in ([1, 5, 6, 7], [1, 200, 6], [1, 9, 9])) + "\n")
    args = ["generate", "--model", d, "--input", tmp_path / "in.jsonl", "--max-tokens", "5", "--temperature", "0",
            "--ignore-eos", "--json", "--threads", "1", "--overlap", overlap]
    r = run(*args)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "1 of 3 requests failed" in lines[0] and "non-finite logits" in lines[0], r.stderr
    records = [json.loads(line) for line in r.stdout.strip().splitlines()]
    assert "non-finite logits" in records[1]["error"] and records[1]["token_ids"] == []
    # The others equal a run without the broken request.
    (tmp_path / "ok.jsonl").write_text(
        "\n".join(json.dumps({"prompt_token_ids": ids}) for ids in ([1, 5, 6, 7], [1, 9, 9])) + "\n")
    ok = run(*[a if a != tmp_path / "in.jsonl" else tmp_path / "ok.jsonl" for a in args])
    assert ok.returncode == 0, ok.stderr
    clean = [json.loads(line) for line in ok.stdout.strip().splitlines()]
    for got, want in zip([records[0], records[2]], clean):
        assert "error" not in got and len(got["token_ids"]) == 5
        assert got["token_ids"] == want["token_ids"]
