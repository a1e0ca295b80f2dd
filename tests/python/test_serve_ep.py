"""`deepinfer serve --ep 2` (expert parallelism over MPI, docs/parallel.md) through the official
`openai` SDK, on the tiny random DeepSeek-V3 fixture the generate --ep tests use: mixed requests
(chat and completions, streaming and not, a JSON-schema response_format) from concurrent clients
give the same greedy text as `serve` without EP, and a client that leaves mid-stream has its
request aborted on its rank; in batch-invariant mode logprobs and seeded
samples are bitwise equal (that server started by `mpirun -n 2` itself); the prefix cache works
on a rank; a rank killed with -9 makes the server answer 503 (in-flight streams end with an
error, /health says why) and exit 1 instead of hanging; a rank count that does not divide the
experts is refused in one line."""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import openai
import pytest

from byte_tokenizer import write_byte_tokenizer
from conftest import BINARY, IN_CI, ROOT, run
from server_util import free_port

FIXTURE = ROOT / "tests/reference/fixtures/deepseek_v3/dense_heavy"
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 6}},
          "required": ["a", "b"], "additionalProperties": False}

CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


class EpServer:
    """`deepinfer serve` (optionally under `mpirun`) on a free port, with its log."""

    def __init__(self, model, *extra, mpirun=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", prefix="deepinfer-serve-ep-", suffix=".log")
        cmd = [str(BINARY), "serve", "--model", str(model), "--port", str(self.port), "--threads", "1",
               "--served-model-name", "m",
               *map(str, extra)]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.proc = subprocess.Popen((mpirun or []) + cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 120
        while time.time() < deadline:
            assert self.proc.poll() is None, f"server exited early: {self.output()}"
            if self.health()[0] == 200:
                self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="none", max_retries=0)
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("server did not become healthy in 120 s")

    def health(self):
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())
        except (urllib.error.URLError, OSError):
            return None, None

    def metrics(self):
        """The /metrics samples as {name{labels}: value}."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines()
                                         if line and not line.startswith("#"))}

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, binary):
    if shutil.which("mpirun") is None:
        if IN_CI:
            pytest.fail("mpirun is missing (scripts/install_deps.sh installs openmpi-bin)")
        pytest.skip("mpirun is not installed")
    d = tmp_path_factory.mktemp("serve_ep") / "dense_heavy"
    shutil.copytree(FIXTURE, d)
    write_byte_tokenizer(d)
    # An end-of-sequence token (id 1, the config's eos_token_id) for structured output, and a
    # plain chat template.
    tok = json.loads((d / "tokenizer.json").read_text())
    tok["added_tokens"] = [{"id": 1, "content": "<|eos|>", "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True}]
    (d / "tokenizer.json").write_text(json.dumps(tok))
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHAT_TEMPLATE, "eos_token": "<|eos|>"}))
    return d


def ask(client, kind, i, logprobs=False, seed=None):
    """One request of a mixed set; returns what must match between servers."""
    prompt = f"request {i}: tell me about the number {i * 7}"
    common = dict(model="m", max_tokens=12, temperature=0 if seed is None else 0.9)
    if seed is not None:
        common["seed"] = seed
    if kind == "completion":
        if logprobs:
            common["logprobs"] = 2
        r = client.completions.create(prompt=prompt, **common)
        lp = r.choices[0].logprobs.token_logprobs if logprobs else None
        return r.choices[0].text, r.choices[0].finish_reason, lp
    if kind == "completion_stream":
        text = "".join(c.choices[0].text for c in client.completions.create(prompt=prompt, stream=True, **common)
                       if c.choices)
        return text, None, None
    messages = [{"role": "user", "content": prompt}]
    if kind == "chat_stream":
        chunks = client.chat.completions.create(messages=messages, stream=True, **common)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), None, None
    extra = {"logprobs": True, "top_logprobs": 2} if logprobs else {}
    if kind == "json":
        common["max_tokens"] = 48
        extra["response_format"] = {"type": "json_schema", "json_schema": {"name": "t", "schema": SCHEMA}}
    r = client.chat.completions.create(messages=messages, **common, **extra)
    assert r.choices, r
    c = r.choices[0]
    lp = [(t.token, t.logprob, [(x.token, x.logprob) for x in t.top_logprobs]) for t in c.logprobs.content] \
        if logprobs else None
    return c.message.content, c.finish_reason, lp


KINDS = ["chat", "chat_stream", "completion", "completion_stream", "json"]
JOBS = [(k, i) for i in range(3) for k in KINDS]


def run_all(server, logprobs=False, seed=None):
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(ask, server.client, k, i, logprobs, seed) for k, i in JOBS]
        return [f.result(timeout=120) for f in futures]


def test_greedy_outputs_equal_serve_without_ep(model_dir):
    one = EpServer(model_dir)
    try:
        expected = run_all(one)
    finally:
        one.stop()
    two = EpServer(model_dir, "--ep", "2")
    try:
        got = run_all(two)
        # The JSON-schema answers are JSON that the schema accepts.
        for (kind, _), (text, _, _) in zip(JOBS, got):
            if kind == "json":
                assert set(json.loads(text)) == {"a", "b"}
        assert got == expected
        # Both ranks took requests and computed MoE rows; the imbalance is a ratio >= 1.
        m = two.metrics()
        assert m["deepinfer_ep_ranks"] == 2 and m['deepinfer_ep_rank_up{rank="1"}'] == 1
        assert all(m[f'deepinfer_ep_rank_moe_rows_total{{rank="{r}"}}'] > 0 for r in (0, 1)), m
        assert 1.0 <= m["deepinfer_ep_moe_imbalance"] <= 2.0
        # Prefix cache: the same long prompt twice (both on the least-loaded rank 0 when idle).
        prompt = "a long shared prefix that fills more than one KV block " * 3
        usage = [two.client.completions.create(model="m", prompt=prompt, max_tokens=2).usage for _ in range(2)]
        assert usage[0].prompt_tokens_details.cached_tokens == 0
        assert usage[1].prompt_tokens_details.cached_tokens >= 16
        # A client that goes away mid-stream: its request is aborted on its rank.
        with two.client.completions.create(model="m", prompt="going away", max_tokens=450, stream=True,
                                           extra_body={"ignore_eos": True}) as stream:
            next(iter(stream))
        deadline = time.time() + 20
        while time.time() < deadline:
            m = two.metrics()
            if m["deepinfer_aborted_requests_total"] == 1 and m["deepinfer_num_requests_in_flight"] == 0 and \
                    m['deepinfer_ep_rank_running_sequences{rank="0"}'] == 0:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the abandoned request is still running: {m}")
    finally:
        assert two.stop() == 0, two.output()


def test_batch_invariant_logprobs_and_seeded_samples_bitwise_equal_under_mpirun(model_dir, tmp_path):
    # Experts placed by EPLB from a recorded trace, with 4 redundant replicas.
    trace = tmp_path / "trace.json"
    r = run("generate", "--model", model_dir, "--prompt", "a trace", "--max-tokens", "8", "--threads", "1",
            "--expert-trace", trace)
    assert r.returncode == 0, r.stderr
    one = EpServer(model_dir, "--batch-invariant")
    try:
        greedy = run_all(one, logprobs=True)
        seeded = run_all(one, seed=1234)
    finally:
        one.stop()
    mpirun = ["mpirun", "-n", "2", "--oversubscribe", "--bind-to", "none", "--mca",
              "btl_vader_single_copy_mechanism", "none"]
    two = EpServer(model_dir, "--batch-invariant", "--ep", "2", "--eplb-trace", trace, "--redundant", "4",
                   mpirun=mpirun)
    try:
        assert run_all(two, logprobs=True) == greedy  # floats compared exactly
        assert run_all(two, seed=1234) == seeded
    finally:
        two.stop()  # mpirun's own status on SIGTERM is 1, whatever its ranks return


def rank_pids(launcher_pid):
    """{rank: pid} of the deepinfer processes under the launcher (found through their MPI env)."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            env = open(f"/proc/{p}/environ", "rb").read().split(b"\0")
            cmd = open(f"/proc/{p}/cmdline", "rb").read()
        except OSError:
            continue
        if b"serve" not in cmd or f"DEEPINFER_EP_RANK0_PIDFILE={tempfile.gettempdir()}/deepinfer-ep-{launcher_pid}.pid".encode() not in env:
            continue
        for e in env:
            if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                out[int(e.split(b"=")[1])] = int(p)
    return out


def test_dead_rank_gives_503_and_exit_not_a_hang(model_dir):
    s = EpServer(model_dir, "--ep", "2", "--max-num-seqs", "2", "--ep-failure-grace", "4")
    try:
        pids = rank_pids(s.proc.pid)
        assert sorted(pids) == [0, 1], pids
        started = concurrent.futures.Future()

        def stream(i):
            try:
                chunks = s.client.completions.create(model="m", prompt=f"stream {i}", max_tokens=450, stream=True,
                                                     temperature=0, extra_body={"ignore_eos": True})
                n = 0
                try:
                    for c in chunks:
                        n += 1
                        if not started.done():
                            started.set_result(True)
                except openai.APIError as e:  # an error event after the stream began
                    return ("error in stream", str(e), n)
                return ("done", "", n)
            except openai.APIError as e:  # refused before its first token: 503
                return ("error", str(e), 0)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(stream, i) for i in range(8)]
            started.result(timeout=60)
            os.kill(pids[1], signal.SIGKILL)
            results = [f.result(timeout=30) for f in futures]  # none hangs
        errors = [r[1] for r in results if r[0] != "done"]
        assert any(r[0] == "error in stream" for r in results), results
        assert all("rank 1 of 2" in e for e in errors), errors
        status, body = s.health()
        assert status == 503 and "rank 1 of 2" in body["reason"], body
        with pytest.raises(openai.APIStatusError) as e:
            s.client.completions.create(model="m", prompt="after", max_tokens=2)
        assert e.value.status_code == 503 and "rank 1 of 2" in str(e.value)
        assert s.metrics()['deepinfer_ep_rank_up{rank="1"}'] == 0
        # After the grace period the server exits 1 on its own (a supervisor restarts it).
        assert s.proc.wait(timeout=30) == 1, s.output()
        assert "expert-parallel rank 1 exited or was killed" in s.output()
    finally:
        s.stop()


def test_rank_count_not_dividing_the_experts_is_refused_in_one_line(model_dir):
    r = run("serve", "--model", model_dir, "--port", "0", "--ep", "3", timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "16 routed experts do not divide over 3 ranks" in r.stderr
