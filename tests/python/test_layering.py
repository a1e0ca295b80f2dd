"""The layering check: the real tree is clean, and an include that points up the table fails."""
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layering.py"


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)],
                          capture_output=True, text=True, timeout=60)


def test_the_tree_follows_the_module_table():
    r = check(ROOT)
    assert r.returncode == 0, r.stderr


def make_tree(tmp_path, module, include):
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "architecture.md", tmp_path / "docs" / "architecture.md")
    d = tmp_path / "src" / "deepinfer" / module
    d.mkdir(parents=True)
    (d / "x.cc").write_text(f'// test\n#include "deepinfer/{include}/y.h"\n')
    return tmp_path


def test_an_upward_include_fails_and_names_the_file(tmp_path):
    r = check(make_tree(tmp_path, "kvstore", "engine"))
    assert r.returncode == 1
    assert "kvstore/x.cc:2" in r.stderr and "may not include engine/" in r.stderr


def test_base_may_include_nothing_of_ours(tmp_path):
    assert check(make_tree(tmp_path, "base", "tensor")).returncode == 1


def test_an_allowed_include_passes(tmp_path):
    assert check(make_tree(tmp_path, "engine", "kvstore")).returncode == 0


def test_a_module_without_a_row_fails(tmp_path):
    r = check(make_tree(tmp_path, "newmodule", "base"))
    assert r.returncode == 1 and "no row" in r.stderr
