"""Issue #30 through the CLI: `kvstore gc/verify` refuse target lists that do not match the store
(subsets, missing paths, plain files, a directory listed twice), the engine starts with up to m
unusable targets, and per-class lifetimes (`--kv-store-ttl`, a chat hit extending agent blocks)."""
import json
import pathlib
import time

from conftest import run
from kvstore_util import PROMPT, generate, home_env, store_args


def kvstore(*args, env=None):
    r = run("kvstore", *map(str, args), env=env)
    return r.returncode, r.stdout, r.stderr


def stat(dirs, env=None):
    rc, out, err = kvstore("stat", "--json", *dirs, env=env)
    assert rc == 0, err
    return json.loads(out)


def shard_mtimes(dirs):
    return [p.stat().st_mtime for d in dirs for p in pathlib.Path(d, "kv1").glob("??/*.*")
            if not p.name.startswith(".") and p.suffix[1:].isdigit()]


def test_gc_of_a_subset_is_refused_and_deletes_nothing(model, tmp_path):
    env = home_env(tmp_path)
    dirs = [tmp_path / f"t{i}" for i in range(6)]
    generate(model, *store_args(dirs), env=env)
    before = stat(dirs, env)
    assert before["entries"] > 5
    rc, _, err = kvstore("gc", *dirs[:3], env=env)
    assert rc != 0 and "created with 6 targets" in err, err
    rc, _, err = kvstore("verify", *dirs[:3], env=env)
    assert rc != 0, err
    rc, _, err = kvstore("gc", dirs[1], dirs[0], *dirs[2:], env=env)
    assert rc != 0 and "order" in err, err
    after = stat(dirs, env)
    assert after["entries"] == before["entries"]
    assert sum(t["shard_files"] for t in after["targets"]) == sum(t["shard_files"] for t in before["targets"])
    rc, out, err = kvstore("gc", "--json", *dirs, env=env)
    assert rc == 0, err
    assert json.loads(out)["files_removed"] == 0
    assert stat(dirs, env)["store_id"]  # the manifest's


def test_missing_paths_plain_files_and_duplicates_are_refused(model, tmp_path):
    env = home_env(tmp_path)
    dirs = [tmp_path / f"t{i}" for i in range(3)]
    generate(model, *store_args(dirs), env=env)
    plain = tmp_path / "plain"
    plain.write_text("x")
    for bad in ([dirs[0], tmp_path / "nope", dirs[2]], [dirs[0], plain, dirs[2]]):
        for action in ("verify", "gc"):
            rc, _, err = kvstore(action, *bad, env=env)
            assert rc != 0 and "deepinfer:" in err, (action, bad, err)
    twice = [dirs[0], dirs[1], str(dirs[0]) + "/"]
    for action in ("verify", "gc", "stat"):
        rc, _, err = kvstore(action, *twice, env=env)
        assert rc != 0 and "same directory" in err, (action, err)
    r = run("generate", "--model", model, "--prompt", "hi", "--max-tokens", "1",
            *store_args(twice), env=env)
    assert r.returncode != 0 and "same directory" in r.stderr, r.stderr


def test_engine_starts_with_up_to_m_unusable_targets(model, tmp_path):
    env = home_env(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    dirs = [tmp_path / f"t{i}" for i in range(6)]  # 4+2
    dirs[2] = blocker / "t2"  # cannot be created
    out = run("generate", "--model", model, "--prompt", PROMPT, "--max-tokens", "4", "--json",
              "--no-chat", "--temperature", "0", *store_args(dirs), env=env)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("unusable") == 1, out.stderr
    again = generate(model, *store_args(dirs), env=env)
    assert again["usage"]["cached_tokens"] > 100
    dirs[3] = blocker / "t3"
    dirs[4] = blocker / "t4"
    refused = run("generate", "--model", model, "--prompt", "hi", "--max-tokens", "1",
                  *store_args(dirs), env=env)
    assert refused.returncode != 0 and "3 of 6 targets unusable" in refused.stderr, refused.stderr


def test_chat_hit_on_agent_blocks_keeps_the_chat_lifetime(model, tmp_path):
    env = home_env(tmp_path)
    dirs = [tmp_path / f"t{i}" for i in range(3)]
    generate(model, "--traffic-class", "agent", *store_args(dirs), env=env)
    now = time.time()
    agent = shard_mtimes(dirs)
    assert agent and all(abs(m - (now + 3 * 86400)) < 600 for m in agent), agent[:3]
    hit = generate(model, "--traffic-class", "chat", *store_args(dirs), env=env)
    assert hit["usage"]["cached_tokens"] > 100
    now = time.time()
    shared = shard_mtimes(dirs)
    assert all(abs(m - (now + 7 * 86400)) < 600 for m in shared), shared[:3]


def test_kv_store_ttl_flag(model, tmp_path):
    env = home_env(tmp_path)
    dirs = [tmp_path / f"t{i}" for i in range(3)]
    generate(model, "--traffic-class", "agent", "--kv-store-ttl", "agent=1h,chat=2h",
             *store_args(dirs), env=env)
    now = time.time()
    assert all(abs(m - (now + 3600)) < 300 for m in shard_mtimes(dirs))
    generate(model, "--traffic-class", "chat", "--kv-store-ttl", "agent=1h,chat=2h",
             *store_args(dirs), env=env)
    now = time.time()
    assert all(abs(m - (now + 7200)) < 300 for m in shard_mtimes(dirs))
    for bad in ("agent=3x", "batch=1d", "agent", "chat=0d"):
        r = run("generate", "--model", model, "--prompt", "hi", "--max-tokens", "1",
                "--kv-store-ttl", bad, *store_args(dirs), env=env)
        assert r.returncode == 2 and "--kv-store-ttl" in r.stderr, (bad, r.stderr)


def test_kvstore_rm_removes_an_entry(model, tmp_path):
    env = home_env(tmp_path)
    dirs = [tmp_path / f"t{i}" for i in range(3)]
    generate(model, *store_args(dirs), env=env)
    names = sorted(p.name for d in dirs for p in pathlib.Path(d, "kv1").glob("??/*.*")
                   if not p.name.startswith("."))
    key = names[0].split(".")[0]
    before = stat(dirs, env)["entries"]
    rc, out, err = kvstore("rm", "--json", "--key", key, *dirs, env=env)
    assert rc == 0, err
    assert json.loads(out)["shard_files_removed"] == 3  # 1+2 on 3 targets
    assert stat(dirs, env)["entries"] == before - 1
    assert not any(p.name.startswith(key) for d in dirs for p in pathlib.Path(d, "kv1").glob("??/*"))
    rc, _, err = kvstore("rm", "--key", "xyz", *dirs, env=env)
    assert rc == 2 and "64-hex" in err, err
    rc, _, err = kvstore("rm", *dirs, env=env)
    assert rc == 2 and "--key" in err, err
