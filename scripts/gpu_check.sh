#!/usr/bin/env bash
# The GPU check for a lent GPU (docs/cuda.md): builds the CUDA back end, runs every GPU test and
# the kernel micro-benchmark, and writes a JSON report to OUT_DIR. Exits non-zero, with the
# reason, when no GPU is visible: a machine without one can never produce a passing report.
#
#   scripts/gpu_check.sh OUT_DIR [BUILD_DIR]      (BUILD_DIR default: build-gpu)
#
# OUT_DIR gets: report.json (summary), test_cuda.json (gtest), test_cuda.log, bench_cuda.jsonl,
# build.log. Meant to finish in well under 8 minutes on one H200 host (16 cores): it configures
# with -DDEEPINFER_KERNELS_ONLY=ON and builds only the kernels, test_cuda and bench_cuda, which
# need nothing beyond a compiler, CMake, the CUDA toolkit, fmt and GoogleTest. The lent machine
# has no Debian packages and no network: run scripts/gpu_check_deps.sh here first and carry
# .gpudeps (used as CMAKE_PREFIX_PATH when present).
set -uo pipefail

out=${1:?usage: scripts/gpu_check.sh OUT_DIR [BUILD_DIR]}
build=${2:-build-gpu}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
start=$(date +%s)

fail() {
  echo "gpu_check: FAILED: $*" >&2
  python3 - "$out/report.json" "$*" "$start" <<'PY'
import json, sys, time
json.dump({"ok": False, "error": sys.argv[2], "seconds": int(time.time()) - int(sys.argv[3])},
          open(sys.argv[1], "w"), indent=2)
PY
  exit 1
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
  > "$out/nvidia_smi.txt" 2>&1
cd "$root" || fail "no repository at $root"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
prefix=(); [ -d "$root/.gpudeps" ] && prefix=(-DCMAKE_PREFIX_PATH="$root/.gpudeps")
jobs=$(nproc)
{
  cmake -S . -B "$build" "${gen[@]}" "${prefix[@]}" -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON \
    -DDEEPINFER_KERNELS_ONLY=ON -DDEEPINFER_WERROR=ON &&
  cmake --build "$build" -j "$jobs" --target test_cuda bench_cuda
} > "$out/build.log" 2>&1 || fail "build failed (last lines: $(tail -n 5 "$out/build.log" | tr '\n' ' '))"
build_s=$(( $(date +%s) - start ))

# The benchmark probes first: exit 3 = no GPU visible, with the reason on stderr.
"$build/bin/bench_cuda" > "$out/bench_cuda.jsonl" 2> "$out/bench_cuda.err"
bench_rc=$?
if [ "$bench_rc" -eq 3 ]; then
  fail "$(cat "$out/bench_cuda.err")"
fi

"$build/bin/test_cuda" --gtest_output="json:$out/test_cuda.json" > "$out/test_cuda.log" 2>&1
test_rc=$?

python3 - "$out" "$test_rc" "$bench_rc" "$build_s" "$start" <<'PY'
import json, sys, time, pathlib
out, test_rc, bench_rc, build_s, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
o = pathlib.Path(out)
tests = {"passed": [], "failed": [], "skipped": []}
try:
    g = json.loads((o / "test_cuda.json").read_text())
    for suite in g.get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = f'{suite["name"]}.{t["name"]}'
            if t.get("failures"):
                tests["failed"].append({"name": name, "message": t["failures"][0].get("failure", "")[:2000]})
            elif t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN":
                tests["skipped"].append(name)
            else:
                tests["passed"].append(name)
except Exception as e:  # no JSON: the binary crashed
    tests["failed"].append({"name": "test_cuda", "message": f"no gtest report ({e}); see test_cuda.log"})
bench = []
for line in (o / "bench_cuda.jsonl").read_text().splitlines():
    try:
        bench.append(json.loads(line))
    except ValueError:
        pass
gpu = bench[0] if bench and "gpu" in bench[0] else {}
# On a GPU nothing may be skipped except the test that only runs where there is no GPU.
unexpected_skips = [n for n in tests["skipped"] if n != "CudaRuntime.NoGpuGivesStatusesNotCrashes"]
ok = test_rc == 0 and bench_rc == 0 and not tests["failed"] and not unexpected_skips and bool(gpu)
report = {"ok": ok, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": gpu,
          "build_seconds": build_s, "seconds": int(time.time()) - start,
          "test_exit": test_rc, "bench_exit": bench_rc,
          "tests": {k: len(v) for k, v in tests.items()}, "failed": tests["failed"],
          "skipped": tests["skipped"], "bench": bench[1:]}
(o / "report.json").write_text(json.dumps(report, indent=2))
print(json.dumps({k: report[k] for k in ("ok", "gpu", "tests", "seconds")}))
sys.exit(0 if ok else 1)
PY
rc=$?
[ $rc -eq 0 ] || echo "gpu_check: FAILED (see $out/report.json)" >&2
exit $rc
