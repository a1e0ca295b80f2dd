"""A disaggregated deployment for tests: `deepinfer cluster` on loopback, its printed table of
processes, each process's log and the entrypoint's and engines' /metrics."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from conftest import BINARY
from server_util import free_port

MODEL_NAME = "smollm2-135m-instruct"
ENGINE_FLAGS = ["--batch-invariant", "--threads", "1", "--kv-cache-gb", "0.25"]
NAME_FLAGS = ["--served-model-name", "smollm2-135m-instruct"]


class Cluster:
    """`deepinfer cluster` with a shared KV store in a temp dir; children = {name: (pid, port)}."""
    def __init__(self, model, prefill=2, decode=2, extra=()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logdir = tempfile.mkdtemp(prefix="deepinfer-pd-test-")
        self.store = tempfile.mkdtemp(prefix="deepinfer-pd-store-")
        self.out = open(os.path.join(self.logdir, "cluster.out"), "w+")
        self.proc = subprocess.Popen(
            [str(BINARY), "cluster", "--model", str(model), "--prefill", str(prefill), "--decode", str(decode),
             "--port", str(self.port), "--log-dir", self.logdir, "--kv-store", self.store, *ENGINE_FLAGS, *NAME_FLAGS, *extra],
            stdout=self.out, stderr=subprocess.STDOUT, text=True, env={**os.environ, "DEEPINFER_LOG": "info"})
        self.children = {}
        self.restarted = []
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("cluster exited: " + self.output())
            text = self.output()
            if "Ctrl-C stops them all" in text:
                for name, pid, port in re.findall(r"^\s+(\S+)\s+pid (\d+)\s+http://127\.0\.0\.1:(\d+)", text, re.M):
                    self.children[name] = (int(pid), int(port))
                return
            time.sleep(0.3)
        self.stop()
        raise RuntimeError("cluster did not start in 300 s: " + self.output())

    def output(self):
        self.out.flush()
        with open(self.out.name) as f:
            return f.read()

    def log(self, name):
        with open(os.path.join(self.logdir, name + ".log")) as f:
            return f.read()

    def metrics(self, url=None):
        out = {}
        with urllib.request.urlopen((url or self.url) + "/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line and not line.startswith("#"):
                    key, value = line.rsplit(" ", 1)
                    out[key] = float(value)
        return out

    def engine_counter(self, pool, name, counter):
        port = self.children[name][1]
        key = f'deepinfer_pd_engine_{counter}{{pool="{pool}",engine="127.0.0.1:{port}"}}'
        return self.metrics().get(key, 0)

    def kill(self, name):
        """SIGKILLs a child; returns its command line (to restart it the way cluster started it)."""
        pid = self.children[name][0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
        os.kill(pid, signal.SIGKILL)
        return argv

    def restart(self, name, argv):
        """Starts a killed child again on its port (as a Kubernetes restart would)."""
        log = open(os.path.join(self.logdir, name + ".restarted.log"), "w")
        proc = subprocess.Popen([str(BINARY), *argv[1:]], stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "DEEPINFER_LOG": "info"})
        self.restarted.append(proc)
        self.children[name] = (proc.pid, self.children[name][1])
        return proc

    def health(self):
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def stop(self):
        for p in self.restarted:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()
        # The KV store (hundreds of MB) would pile up in /tmp run after run; the logs (a few KB)
        # stay for whoever debugs a failed test.
        shutil.rmtree(self.store, ignore_errors=True)
        return self.proc.returncode
