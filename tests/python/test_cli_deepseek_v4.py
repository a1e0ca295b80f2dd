"""`deepinfer generate --model DIR` end to end on the tiny DeepSeek-V4 fixtures (made by
tests/reference/make_tiny_deepseek_v4.py), given a 128-token byte-level tokenizer written at
test time: greedy tokens equal transformers' continuation (also with FP4 experts); broken
checkpoints (a bad config field, a NaN or out-of-range FP4 scale) exit 1 with one line naming the
file and the field or tensor."""
import json
import shutil
import struct

import pytest

from byte_tokenizer import write_byte_tokenizer
from conftest import ROOT, run
from server_util import Server, post_json

FIXTURES = ROOT / "tests/reference/fixtures/deepseek_v4"


def model_dir(tmp_path, name):
    out = tmp_path / name
    shutil.copytree(FIXTURES / name, out)
    (out / "expected.json").unlink()
    write_byte_tokenizer(out)
    return out


@pytest.mark.parametrize("name", ["h2_mixed", "h4_deepseek", "h2_hfnames", "fp8_ue8m0", "fp4_e2m1"])
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


@pytest.mark.parametrize("tensor, byte, needle", [
    ("layers.1.ffn.experts.2.w1.scale", 0xFF, "NaN scale"),
    ("mtp.0.ffn.experts.0.w3.scale", 0xFE, "out of range"),
])
def test_bad_fp4_scale_exits_1_naming_file_and_tensor(binary, tmp_path, tensor, byte, needle):
    d = model_dir(tmp_path, "fp4_e2m1")
    path = d / "model.safetensors"
    data = bytearray(path.read_bytes())
    n = struct.unpack("<Q", data[:8])[0]
    data[8 + n + json.loads(data[8:8 + n])[tensor]["data_offsets"][0]] = byte
    path.write_bytes(data)
    r = run("generate", "--model", d, "--prompt", "hi", "--max-tokens", "2")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and f"'{tensor}'" in lines[0] and str(path) in lines[0], r.stderr


def test_kv_store_restores_a_prompt_in_another_process_from_its_checkpoint(binary, tmp_path):
    """A second `generate` process on the same --kv-store restores the 37-token prompt's
    prefix exactly (its blocks' paged state plus the sliding-window checkpoint the first process
    wrote at the prompt's end) and continues with transformers' tokens; kvstore stat counts the
    checkpoint parts apart from the blocks."""
    expected = json.loads((FIXTURES / "h2_mixed" / "expected.json").read_text())
    case = expected["cases"][2]
    d = model_dir(tmp_path, "h2_mixed")
    (tmp_path / "in.jsonl").write_text(json.dumps({"prompt_token_ids": case["ids"]}) + "\n")
    store = tmp_path / "store"
    args = ["generate", "--model", d, "--input", tmp_path / "in.jsonl", "--max-tokens", "8", "--temperature", "0",
            "--ignore-eos", "--json", "--threads", "1", "--kv-store", store]
    records = []
    for _ in range(2):
        r = run(*args, "--swa-restore", "exact")
        assert r.returncode == 0, r.stderr
        records.append(json.loads(r.stdout.strip().splitlines()[0]))
    assert records[0]["token_ids"] == records[1]["token_ids"] == case["greedy"]
    assert records[0]["usage"]["cached_tokens"] == 0
    assert records[1]["usage"]["cached_tokens"] >= 32, records[1]
    assert "replayed_tokens" not in records[1]["usage"]
    stat = json.loads(run("kvstore", "stat", "--json", store).stdout)
    kinds = stat["entries_by_kind"]
    assert kinds["kv_block"] > 0 and kinds["swa_checkpoint"] > 0, stat
    assert kinds["kv_block"] + kinds["swa_checkpoint"] == stat["entries"], stat


def test_server_metrics_count_checkpoint_saves_queries_and_loads(binary, tmp_path):
    """/metrics of `serve --kv-store`: the first server writes the prompt's sliding-window
    checkpoint (`deepinfer_swa_checkpoints_saved_total`); a second server on the same store asks
    the store for a checkpoint at the hit's prefix ends (`deepinfer_swa_checkpoint_queries_total`,
    one lookup each) and restores the prefix exactly from one (`_checkpoints_loaded_total`)."""
    d = model_dir(tmp_path, "h2_mixed")
    store = tmp_path / "store"
    body = {"model": "tiny-v4", "prompt": "The river flows past the old mill and the stone bridge, then on.",
            "max_tokens": 4, "temperature": 0, "ignore_eos": True}
    metrics = []
    for _ in range(2):
        s = Server(d, "--served-model-name", "tiny-v4", "--threads", "1", "--kv-store", store,
                   "--swa-restore", "exact")
        try:
            status, reply = post_json(s, "/v1/completions", body)
            assert status == 200, reply
            metrics.append((reply, s.metrics()))
        finally:
            assert s.stop() == 0, s.output()[-2000:]  # shutdown flushes the store's writes
    (first, m1), (second, m2) = metrics
    assert second["choices"][0]["text"] == first["choices"][0]["text"]
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= 32, second["usage"]
    assert m1["deepinfer_swa_checkpoints_saved_total"] >= 1, m1
    assert m1["deepinfer_swa_checkpoint_queries_total"] == 0, m1  # nothing in the store to ask about
    assert m2["deepinfer_swa_checkpoint_queries_total"] >= 1, m2
    assert m2["deepinfer_swa_checkpoints_loaded_total"] == 1, m2
