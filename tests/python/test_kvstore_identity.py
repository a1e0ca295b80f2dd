"""Issue #30, wrong output: KV computed by one model or one precision must never be served to
another. End to end through `deepinfer generate --kv-store`."""
import os

from kvstore_util import copy_model, generate, home_env, store_args, write_changed_model


def test_same_size_model_at_same_path_with_reset_mtime_gets_no_foreign_kv(model, tmp_path):
    env = home_env(tmp_path)
    dirs = [tmp_path / f"t{i}" for i in range(3)]
    path = tmp_path / "m.gguf"
    copy_model(model, path)
    first = generate(path, *store_args(dirs), env=env)
    assert first["usage"]["cached_tokens"] == 0
    again = generate(path, *store_args(dirs), env=env)
    assert again["usage"]["cached_tokens"] > 100, again  # the store works for the same model
    st = os.stat(path)
    write_changed_model(model, path)  # same path, inode, size, mtime; other weights
    st2 = os.stat(path)
    assert (st2.st_ino, st2.st_size, st2.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    alone = generate(path, env=env)  # the changed model without any store
    assert alone["token_ids"] != first["token_ids"], "the weight change must matter"
    served = generate(path, *store_args(dirs), env=env)
    assert served["usage"]["cached_tokens"] == 0, served
    assert served["token_ids"] == alone["token_ids"]


def test_matmul_precision_is_part_of_the_namespace(model, tmp_path):
    env = home_env(tmp_path)
    dirs = [tmp_path / f"t{i}" for i in range(3)]
    int8 = generate(model, "--matmul-precision", "int8", *store_args(dirs), env=env)
    assert int8["usage"]["cached_tokens"] == 0
    high = generate(model, "--matmul-precision", "high", *store_args(dirs), env=env)
    assert high["usage"]["cached_tokens"] == 0, high
    alone = generate(model, "--matmul-precision", "high", env=env)
    assert high["token_ids"] == alone["token_ids"]
    # Same settings again do share.
    again = generate(model, "--matmul-precision", "int8", *store_args(dirs), env=env)
    assert again["usage"]["cached_tokens"] > 100
    assert again["token_ids"] == int8["token_ids"]


def test_weights_digest_is_cached_per_file_version(model, tmp_path):
    env = home_env(tmp_path)
    dirs = [tmp_path / "t0", tmp_path / "t1"]
    path = tmp_path / "m.gguf"
    copy_model(model, path)
    generate(path, *store_args(dirs), env=env)
    cache = tmp_path / "home" / "kvstore" / "weights-digests"
    lines = cache.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith(" " + str(path)), lines
    write_changed_model(model, path)
    generate(path, *store_args(dirs), env=env)
    lines2 = cache.read_text().splitlines()
    assert len(lines2) == 1 and lines2[0] != lines[0], (lines, lines2)
    assert lines2[0].split()[0] != lines[0].split()[0]  # another digest
