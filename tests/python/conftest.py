"""Shared fixtures for the CLI tests: the built binary and the default model."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = ROOT / "build" / "bin" / "deepinfer"
HOME = pathlib.Path(os.environ.get("DEEPINFER_HOME", pathlib.Path.home() / ".cache" / "deepinfer"))
MODEL = HOME / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
IN_CI = os.environ.get("CI") == "true"


def run(*args, input=None, timeout=300, env=None):
    """Runs the CLI; returns the CompletedProcess (text mode)."""
    return subprocess.run([str(BINARY), *map(str, args)], input=input, capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture(scope="session")
def binary():
    if not BINARY.exists():
        pytest.fail(f"{BINARY} is missing: run `make` first")
    return BINARY


@pytest.fixture(scope="session")
def model(binary):
    if not MODEL.exists():
        if IN_CI:
            pytest.fail(f"{MODEL} is missing (make test pulls it)")
        pytest.skip(f"{MODEL} is missing: run `deepinfer pull smollm2-135m-instruct`")
    return MODEL
