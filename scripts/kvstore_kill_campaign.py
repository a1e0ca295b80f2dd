#!/usr/bin/env python3
"""kill -9 campaign against the KV store, end to end (issue #30).

Runs `deepinfer generate --kv-store` processes over shared targets and SIGKILLs them at random
moments (most while blocks are being written), then checks what an operator cares about:

  corrupt     shards that fail their checksum / entries verify cannot decode (must be 0)
  wrong       generations through the store that differ from the same prompts without it (0)
  leftovers   temp files still present after the next process opened the store (0)

Usage: scripts/kvstore_kill_campaign.py [--kills 50] [--targets 6] [--pool 16] [--seed 1] [--binary PATH]
Prints one JSON summary line; exit 0 when all three are 0.
"""
import argparse
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORDS = ("river mill bridge stone water light tower garden market window letter winter "
         "harbor engine signal forest valley shadow silver copper village morning").split()


def prompt(rng, n_words):
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def written_bytes(pid):
    try:
        with open(f"/proc/{pid}/io") as f:
            fields = dict(line.split(": ") for line in f.read().splitlines())
        return int(fields["wchar"]) + int(fields["write_bytes"])
    except (OSError, KeyError, ValueError):
        return None


def wait_for_writes(pid, rng, deadline):
    """Returns once the process has started writing store shards (its I/O counters grow past
    256 KiB) plus a random 0-40 ms, so the kill lands inside a write batch; or at `deadline`."""
    base = None
    while time.monotonic() < deadline:
        now = written_bytes(pid)
        if now is None:
            return
        if base is None:
            base = now
        elif now - base > (256 << 10):
            time.sleep(rng.uniform(0, 0.04))
            return
        time.sleep(0.001)


def gen_cmd(args, prompts, dirs):
    cmd = [str(args.binary), "generate", "--model", str(args.model), "--max-tokens", "6",
           "--temperature", "0", "--json", "--no-chat", "--threads", "2"]
    for p in prompts:
        cmd += ["--prompt", p]
    for d in dirs:
        cmd += ["--kv-store", str(d)]
    return cmd


def token_ids(stdout):
    return [json.loads(line)["token_ids"] for line in stdout.splitlines() if line.strip()]


def run_checked(args, prompts, dirs, env):
    r = subprocess.run(gen_cmd(args, prompts, dirs), capture_output=True, text=True, env=env,
                       timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"generate failed: {r.stderr}")
    return token_ids(r.stdout)


def admin(args, action, dirs, env):
    r = subprocess.run([str(args.binary), "kvstore", action, "--json", *map(str, dirs)],
                       capture_output=True, text=True, env=env, timeout=600)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else {}), r.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--targets", type=int, default=6)
    # Prompts the runs pick their reused one from; all of them are computed without the store
    # (the truth) and read back through it at the end, so a short campaign needs only about as
    # many as it has runs.
    ap.add_argument("--pool", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--binary", type=pathlib.Path, default=ROOT / "build" / "bin" / "deepinfer")
    home = pathlib.Path(os.environ.get("DEEPINFER_HOME", pathlib.Path.home() / ".cache" / "deepinfer"))
    ap.add_argument("--model", type=pathlib.Path,
                    default=home / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--workdir", type=pathlib.Path, default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="kvstore-kill-"))
    dirs = [work / f"t{i}" for i in range(args.targets)]
    env = dict(os.environ, DEEPINFER_HOME=str(work / "home"))
    # Prompts share a long common start (blocks reused across runs) and differ after it.
    base = prompt(rng, 120)
    pool = [base + " " + prompt(rng, 60 + 10 * i) for i in range(args.pool)]
    reference = run_checked(args, pool, [], env)  # no store: the truth
    # A run = one pool prompt + a long fresh one (~100 new blocks to write, written while
    # later chunks are prefilled), so most of its time after loading is spent writing.
    t0 = time.monotonic()
    run_checked(args, pool[:1] + [base + " " + prompt(rng, 1000)], dirs, env)
    full = time.monotonic() - t0
    kills = finished = wrong = temps_left = kills_mid_write = 0
    while kills < args.kills:
        picks = rng.sample(range(len(pool)), 1)
        fresh = base + " " + prompt(rng, 1000)  # new blocks to write in every run
        prompts = [pool[i] for i in picks] + [fresh]
        proc = subprocess.Popen(gen_cmd(args, prompts, dirs), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env)
        wait_for_writes(proc.pid, rng, deadline=time.monotonic() + rng.uniform(0.25, 1.0) * full)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            # Evidence that kills land mid-write: temp files the killed writer left (the next
            # process removes them when it opens the store).
            temps = sum(1 for d in dirs for _ in (d / "kv1").glob("??/.tmp.*"))
            temps_left += temps
            kills_mid_write += temps > 0
            continue
        out = token_ids(proc.stdout.read())
        finished += 1
        wrong += sum(1 for i, ids in zip(picks, out) if ids != reference[i])
    # The next start removes crashed writers' temps; then check everything.
    after = run_checked(args, pool, dirs, env)
    wrong += sum(1 for a, b in zip(after, reference) if a != b)
    rc_stat, stat, _ = admin(args, "stat", dirs, env)
    leftovers = sum(t["temp_files"] for t in stat.get("targets", []))
    rc_verify, verify, err = admin(args, "verify", dirs, env)
    corrupt = verify.get("corrupt_shards", -1) + verify.get("unrecoverable", 0)
    summary = {"kills": kills, "kills_leaving_temps": kills_mid_write, "temps_left_by_kills": temps_left,
               "finished_runs": finished, "entries": verify.get("entries"),
               "degraded_entries": verify.get("degraded"),
               "incomplete_entries": verify.get("incomplete"), "corrupt": corrupt,
               "wrong_outputs": wrong, "leftover_temps": leftovers, "verify_exit": rc_verify,
               "stat_exit": rc_stat, "workdir": str(work)}
    print(json.dumps(summary))
    # verify exits 1 while entries are degraded (a writer killed between its k-th and last
    # rename); those read back exact and the sweeper completes them, so they do not count here.
    ok = corrupt == 0 and wrong == 0 and leftovers == 0 and rc_stat == 0 and verify.get("entries")
    if ok and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
