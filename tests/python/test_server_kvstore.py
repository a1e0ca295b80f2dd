"""`deepinfer serve --kv-store`: per-request traffic classes (body field or header), the KV store
surviving a server restart (cached_tokens and identical output), and its /metrics counters."""
import json
import subprocess
import time

from conftest import BINARY, MODEL
from server_util import Server, post_json

LONG = ("Background: " + "The river flows past the old mill and the stone bridge. " * 12 +
        "Question: what flows?")


def store_stat(dirs):
    r = subprocess.run([str(BINARY), "kvstore", "stat", "--json", *map(str, dirs)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def chat(server, text, **extra):
    body = {"model": MODEL.stem, "messages": [{"role": "user", "content": text}], "max_tokens": 8, "temperature": 0}
    headers = extra.pop("headers", None)
    body.update(extra)
    return post_json(server, "/v1/chat/completions", body, headers=headers)


def test_traffic_class_per_request_and_restart(model, tmp_path):
    dirs = [tmp_path / n for n in "abc"]
    args = []
    for d in dirs:
        args += ["--kv-store", d]
    server = Server(model, *args)
    try:
        status, first = chat(server, LONG, traffic_class="agent")
        assert status == 200, first
        assert first["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0) == 0
        # Different prompts, so each request writes its own blocks under its own class.
        status, _ = chat(server, "Another topic: " + "a b c d e f g h " * 20, headers={"X-Traffic-Class": "chat"})
        assert status == 200
        status, _ = post_json(server, "/v1/completions",
                         {"model": MODEL.stem, "prompt": "Third: " + "one two three four " * 20, "max_tokens": 2,
                          "traffic_class": "agent"})
        assert status == 200
        # Bad values are 400s that name the field or header.
        status, err = chat(server, "x", traffic_class="batch")
        assert status == 400 and "traffic_class" in err["error"]["message"], err
        status, err = chat(server, "x", headers={"X-Traffic-Class": "forever"})
        assert status == 400 and "X-Traffic-Class" in err["error"]["message"], err
        status, err = post_json(server, "/v1/messages",
                           {"model": MODEL.stem, "max_tokens": 4, "traffic_class": 7,
                            "messages": [{"role": "user", "content": "hi"}]})
        assert status == 400 and "traffic_class" in err["error"]["message"], err
        written = server.metrics()["deepinfer_kv_store_written_blocks_total"]
        assert written > 0
    finally:
        assert server.stop() == 0
    stat = store_stat(dirs)
    assert stat["entries_by_class"]["agent"] > 0 and stat["entries_by_class"]["chat"] > 0, stat

    # A new server process: the prefix comes from the store; same answer.
    server = Server(model, *args)
    try:
        status, again = chat(server, LONG, traffic_class="agent")
        assert status == 200, again
        cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached >= again["usage"]["prompt_tokens"] - 16, again["usage"]
        assert again["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]
        m = server.metrics()
        assert m["deepinfer_kv_store_hit_tokens_total"] >= cached
        time.sleep(1.5)  # the store's own counters refresh once a second
        m = server.metrics()
        assert m["deepinfer_kv_store_ssd_read_blocks_total"] * 16 >= cached, m
        assert m["deepinfer_kv_store_write_dropped_total"] == 0
        assert m["deepinfer_kv_store_corrupt_shards_total"] == 0
    finally:
        assert server.stop() == 0


def test_two_servers_share_one_store(model, tmp_path):
    import concurrent.futures
    import time
    dirs = [tmp_path / n for n in "abcd"]
    args = []
    for d in dirs:
        args += ["--kv-store", d]
    a, b = Server(model, *args), Server(model, *args)
    try:
        prompt_a = "Alpha notes: " + "the red fox jumps over the lazy dog. " * 12
        prompt_b = "Beta notes: " + "a quiet lake under the blue mountains. " * 12
        with concurrent.futures.ThreadPoolExecutor(2) as pool:  # both write at the same time
            fa = pool.submit(chat, a, prompt_a)
            fb = pool.submit(chat, b, prompt_b)
            (sa, ra), (sb, rb) = fa.result(), fb.result()
        assert sa == 200 and sb == 200
        # Writes are asynchronous: wait until the store stops growing.
        last, deadline = -1, time.time() + 60
        while time.time() < deadline:
            n = store_stat(dirs)["entries"]
            if n == last and n > 0:
                break
            last = n
            time.sleep(1)
        # Each server now finds the other's prompt in the store.
        (sa2, ra2), (sb2, rb2) = chat(a, prompt_b), chat(b, prompt_a)
        assert sa2 == 200 and sb2 == 200
        for mine, theirs, srv in ((ra2, rb, a), (rb2, ra, b)):
            usage = mine["usage"]
            assert usage["prompt_tokens_details"]["cached_tokens"] >= usage["prompt_tokens"] - 16, usage
            assert mine["choices"][0]["message"]["content"] == theirs["choices"][0]["message"]["content"]
            # Most of it from the store (the chat template's opening blocks are shared by both
            # prompts, so those can come from the server's own RAM).
            assert srv.metrics()["deepinfer_kv_store_hit_tokens_total"] >= usage["prompt_tokens"] // 2
    finally:
        assert a.stop() == 0 and b.stop() == 0
    r = subprocess.run([str(BINARY), "kvstore", "verify", *map(str, dirs)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_metrics_show_an_unusable_target(model, tmp_path):
    """The server starts with one of 6 targets (4+2) impossible to create and says so in /metrics."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    dirs = [tmp_path / f"t{i}" for i in range(6)]
    dirs[5] = blocker / "t5"
    args = []
    for d in dirs:
        args += ["--kv-store", d]
    server = Server(model, *args)
    try:
        status, body = chat(server, LONG)
        assert status == 200, body
        m = server.metrics()
        assert m["deepinfer_kv_store_unusable_targets"] == 1
        assert m["deepinfer_kv_store_written_blocks_total"] > 0
        assert m["deepinfer_kv_store_write_failures_total"] == 0
        assert m["deepinfer_kv_store_repaired_total"] == 0
    finally:
        server.stop()
