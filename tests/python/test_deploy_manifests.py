"""deploy/: the rendered Kubernetes manifests validate against the Kubernetes schemas (strict)
and are wired together; the Dockerfile's runtime stage has the libraries the binary links to."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse

import pytest
import yaml

from conftest import BINARY, IN_CI, ROOT

try:
    import kubernetes_validate
except ImportError:
    if IN_CI:
        raise  # make test installs it (scripts/install_deps.sh --test)
    pytest.skip("kubernetes-validate is not installed (scripts/install_deps.sh --test)", allow_module_level=True)

DEPLOY = ROOT / "deploy"
RENDER = DEPLOY / "render.py"
DOCKERFILE = DEPLOY / "Dockerfile"
K8S_VERSION = "1.30"

# Flags of `deepinfer serve` that the disaggregation work (issue 25) is adding while these
# manifests are written: a binary built before it does not list them yet. They are checked
# against the agreed command line instead: `--prefill URL[,URL...]` and `--decode URL[,URL...]`
# on `--role entrypoint`.
PENDING_SERVE_FLAGS = {"--prefill", "--decode"}

PARAMETER_SETS = {
    "defaults": [],
    "scaled": ["--prefill-replicas", "3", "--decode-replicas", "5", "--entrypoint-replicas", "2",
               "--kv-store-targets", "4", "--kv-store-size", "2Ti", "--namespace", "llm",
               "--image", "registry.example.com/ml/deepinfer:v1.2", "--storage-class", "cephfs",
               "--api-key-secret", "deepinfer-api-key", "--kv-cache-gb", "8",
               "--engine-cpu", "16", "--engine-memory", "64Gi", "--grace-seconds", "900"],
    "path-model-no-store": ["--model", "/var/lib/deepinfer/models/DeepSeek-V3", "--namespace", "default",
                            "--kv-store-targets", "0", "--prefill-replicas", "0", "--decode-replicas", "2",
                            "--engine-cpu", "3500m", "--startup-minutes", "90"],
}


def render(*args, check=True):
    r = subprocess.run([sys.executable, str(RENDER), *map(str, args)], capture_output=True, text=True,
                       timeout=60)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def objects(args):
    return [d for d in yaml.safe_load_all(render(*args).stdout) if d is not None]


def option(args, flag, default):
    return args[args.index(flag) + 1] if flag in args else default


@pytest.fixture(scope="module", params=list(PARAMETER_SETS), ids=list(PARAMETER_SETS))
def rendered(request):
    args = PARAMETER_SETS[request.param]
    return args, objects(args)


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def named(docs, kind, name):
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def pod_specs(docs):
    """(owner, pod spec, pod template metadata) of every Deployment and Job."""
    for d in docs:
        if d["kind"] in ("Deployment", "Job"):
            yield f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"], d["spec"]["template"]["metadata"]


def containers(spec):
    return spec.get("initContainers", []) + spec["containers"]


def serve_args(container):
    """The argument list after `deepinfer serve`, or None for another command."""
    cmd = container.get("command", []) + container.get("args", [])
    return cmd[2:] if cmd[:2] == ["deepinfer", "serve"] else None


def flag_values(args, flag):
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def engine_container(docs, role):
    for d in of_kind(docs, "Deployment"):
        for c in d["spec"]["template"]["spec"]["containers"]:
            args = serve_args(c)
            if args is not None and flag_values(args, "--role") == [role]:
                return d, c
    raise AssertionError(f"no Deployment runs `deepinfer serve --role {role}`")


def test_every_object_validates_against_the_kubernetes_schemas(rendered):
    args, docs = rendered
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("Deployment") == 3 and kinds.count("Service") == 3, kinds
    for d in docs:
        try:
            kubernetes_validate.validate(d, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            pytest.fail(f"{d['kind']}/{d['metadata']['name']}: {path}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError as e:
            pytest.fail(e.message)


def test_the_validator_catches_a_broken_object(rendered):
    # The check above is only worth something if it rejects what Kubernetes would.
    _, docs = rendered
    d = json.loads(json.dumps(of_kind(docs, "Deployment")[0]))
    d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "8000"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)
    d = json.loads(json.dumps(of_kind(docs, "Deployment")[0]))
    d["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)


def test_namespace_is_used_everywhere(rendered):
    args, docs = rendered
    ns = option(args, "--namespace", "deepinfer")
    namespaces = of_kind(docs, "Namespace")
    assert [n["metadata"]["name"] for n in namespaces] == ([] if ns == "default" else [ns])
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"]["namespace"] == ns, d["metadata"]["name"]


def test_every_service_selects_the_pods_of_one_deployment(rendered):
    _, docs = rendered
    deployments = of_kind(docs, "Deployment")
    for d in deployments:
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert d["spec"]["selector"]["matchLabels"].items() <= labels.items(), d["metadata"]["name"]
    for svc in of_kind(docs, "Service"):
        selector = svc["spec"]["selector"]
        assert selector, svc["metadata"]["name"]
        matches = [d for d in deployments
                   if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()]
        assert len(matches) == 1, f"Service {svc['metadata']['name']} selects {len(matches)} Deployments"
        pod = matches[0]["spec"]["template"]["spec"]
        ports = {p.get("name") for c in pod["containers"] for p in c.get("ports", [])} | \
                {p["containerPort"] for c in pod["containers"] for p in c.get("ports", [])}
        for p in svc["spec"]["ports"]:
            assert p.get("targetPort", p["port"]) in ports, (svc["metadata"]["name"], p)


def test_every_probe_port_is_a_declared_container_port(rendered):
    _, docs = rendered
    for owner, spec, _ in pod_specs(docs):
        for c in containers(spec):
            declared = {p["containerPort"] for p in c.get("ports", [])} | \
                       {p["name"] for p in c.get("ports", []) if "name" in p}
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = c.get(kind)
                if probe is None:
                    continue
                action = probe.get("httpGet") or probe.get("tcpSocket")
                assert action is not None, (owner, c["name"], kind)
                assert action["port"] in declared, (owner, c["name"], kind, action["port"], declared)


def test_every_serving_container_has_health_probes(rendered):
    _, docs = rendered
    for d in of_kind(docs, "Deployment"):
        for c in d["spec"]["template"]["spec"]["containers"]:
            name = f"{d['metadata']['name']}/{c['name']}"
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert kind in c, (name, kind)
            assert c["readinessProbe"]["httpGet"]["path"] == "/health", name
            if flag_values(serve_args(c), "--role") != ["entrypoint"]:
                # Engines: every probe asks /health, which is 503 until the model is loaded.
                for kind in ("startupProbe", "livenessProbe"):
                    assert c[kind]["httpGet"]["path"] == "/health", (name, kind)
            # Loading a big model takes minutes: the startup probe must allow for it before
            # liveness can restart the pod.
            startup = c["startupProbe"]
            budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
            assert budget >= 5 * 60, (name, budget)
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= c["resources"][kind].keys(), (name, kind)


def test_startup_budget_follows_the_parameter(rendered):
    args, docs = rendered
    minutes = int(option(args, "--startup-minutes", "30"))
    for role in ("prefill", "decode"):
        _, c = engine_container(docs, role)
        p = c["startupProbe"]
        assert p["periodSeconds"] * p["failureThreshold"] == minutes * 60


def test_every_volume_mount_names_a_declared_volume(rendered):
    _, docs = rendered
    claims = {p["metadata"]["name"] for p in of_kind(docs, "PersistentVolumeClaim")}
    for owner, spec, _ in pod_specs(docs):
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in containers(spec):
            for m in c.get("volumeMounts", []):
                assert m["name"] in volumes, (owner, c["name"], m["name"])
        for v in volumes.values():
            if "persistentVolumeClaim" in v:
                assert v["persistentVolumeClaim"]["claimName"] in claims, (owner, v)


def test_pods_are_scraped_and_stop_gracefully(rendered):
    args, docs = rendered
    for owner, spec, meta in pod_specs(docs):
        if owner.startswith("Job/"):
            continue
        ann = meta.get("annotations", {})
        assert ann.get("prometheus.io/scrape") == "true", owner
        assert ann.get("prometheus.io/path") == "/metrics", owner
        ports = {p["containerPort"] for c in spec["containers"] for p in c.get("ports", [])}
        assert int(ann["prometheus.io/port"]) in ports, (owner, ann)
        grace = spec["terminationGracePeriodSeconds"]
        assert grace == int(option(args, "--grace-seconds", "300")), owner
        for c in spec["containers"]:
            sleep = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
            if sleep[:1] == ["sleep"]:
                assert int(sleep[1]) * 3 <= grace, (owner, sleep, grace)


def test_replicas_follow_the_parameters(rendered):
    args, docs = rendered
    for role, flag in (("prefill", "--prefill-replicas"), ("decode", "--decode-replicas"),
                       ("entrypoint", "--entrypoint-replicas")):
        d, _ = engine_container(docs, role)
        assert d["spec"]["replicas"] == int(option(args, flag, "1")), role


def test_entrypoint_urls_name_the_headless_services_of_the_pools(rendered):
    args, docs = rendered
    ns = option(args, "--namespace", "deepinfer")
    _, entry = engine_container(docs, "entrypoint")
    eargs = serve_args(entry)
    for role in ("prefill", "decode"):
        values = flag_values(eargs, "--" + role)
        assert len(values) == 1, (role, values)
        urls = values[0].split(",")
        assert urls and all(urls), values
        pool, engine = engine_container(docs, role)
        engine_port = int(flag_values(serve_args(engine), "--port")[0])
        assert engine_port in {p["containerPort"] for p in engine["ports"]}
        for url in urls:
            u = urllib.parse.urlsplit(url)
            assert u.scheme == "http" and u.port is not None, url
            labels = u.hostname.split(".")
            if len(labels) > 1:
                assert labels[1] == ns, url
            svc = named(docs, "Service", labels[0])
            assert svc["spec"].get("clusterIP") == "None", f"{labels[0]} is not headless"
            # The Service selects this pool's pods, and the URL's port is the engine's port.
            assert svc["spec"]["selector"].items() <= pool["spec"]["template"]["metadata"]["labels"].items()
            assert u.port in {p["port"] for p in svc["spec"]["ports"]}, url
            assert u.port == engine_port, url
    public = named(docs, "Service", "deepinfer")
    assert public["spec"].get("type", "ClusterIP") == "ClusterIP" and public["spec"].get("clusterIP") != "None"
    entry_port = int(flag_values(eargs, "--port")[0])
    assert [p["port"] for p in public["spec"]["ports"]] == [entry_port]
    assert flag_values(eargs, "--host") == ["0.0.0.0"]


def test_every_pod_serves_the_same_model(rendered):
    args, docs = rendered
    model = option(args, "--model", "smollm2-135m-instruct")
    for role in ("prefill", "decode", "entrypoint"):
        _, c = engine_container(docs, role)
        assert flag_values(serve_args(c), "--model") == [model], role
        assert {"name": "DEEPINFER_HOME", "value": "/var/lib/deepinfer"} in c["env"], role


def test_model_volume_and_pull_step(rendered):
    args, docs = rendered
    model = option(args, "--model", "smollm2-135m-instruct")
    pvc = named(docs, "PersistentVolumeClaim", "deepinfer-models")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    for owner, spec, _ in pod_specs(docs):
        claims = {v["name"]: v["persistentVolumeClaim"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
        model_vols = [n for n, c in claims.items() if c["claimName"] == "deepinfer-models"]
        assert len(model_vols) == 1, owner
        for c in containers(spec):
            mounts = [m for m in c["volumeMounts"] if m["name"] == model_vols[0]]
            assert [m["mountPath"] for m in mounts] == ["/var/lib/deepinfer/models"], (owner, c["name"])
            writes = owner.startswith("Job/")
            assert mounts[0].get("readOnly", False) is not writes, (owner, c["name"])
            if not writes:
                assert claims[model_vols[0]].get("readOnly") is True, owner
    jobs = of_kind(docs, "Job")
    if model.startswith("/"):
        assert jobs == []   # a model given as a path is copied onto the volume by hand
    else:
        assert len(jobs) == 1
        c = jobs[0]["spec"]["template"]["spec"]["containers"][0]
        assert c["command"] + c["args"] == ["deepinfer", "pull", model]
        assert {"name": "DEEPINFER_HOME", "value": "/var/lib/deepinfer"} in c["env"]
    # Every serving pod waits for the model before the engine starts.
    for d in of_kind(docs, "Deployment"):
        init = d["spec"]["template"]["spec"]["initContainers"]
        assert [c["name"] for c in init] == ["wait-for-model"], d["metadata"]["name"]
        assert {"name": "DEEPINFER_MODEL", "value": model} in init[0]["env"]


def test_kv_store_targets_are_shared_volumes_in_both_pools(rendered):
    args, docs = rendered
    n = int(option(args, "--kv-store-targets", "1"))
    size = option(args, "--kv-store-size", "100Gi")
    pvcs = {p["metadata"]["name"]: p for p in of_kind(docs, "PersistentVolumeClaim")
            if p["metadata"]["name"] != "deepinfer-models"}
    assert len(pvcs) == n
    for p in pvcs.values():
        assert p["spec"]["accessModes"] == ["ReadWriteMany"]
        assert p["spec"]["resources"]["requests"]["storage"] == size
        if "--storage-class" in args:
            assert p["spec"]["storageClassName"] == option(args, "--storage-class", None)
        else:
            assert "storageClassName" not in p["spec"]
    seen = {}
    for role in ("prefill", "decode"):
        d, c = engine_container(docs, role)
        dirs = flag_values(serve_args(c), "--kv-store")
        assert len(dirs) == n and len(set(dirs)) == n, (role, dirs)
        volumes = {v["name"]: v for v in d["spec"]["template"]["spec"]["volumes"]}
        mounted = {m["mountPath"]: m for m in c["volumeMounts"]}
        claims = []
        for path in dirs:
            assert path in mounted, (role, path)
            assert not mounted[path].get("readOnly", False)
            claims.append(volumes[mounted[path]["name"]]["persistentVolumeClaim"]["claimName"])
        assert sorted(claims) == sorted(pvcs), role
        seen[role] = list(zip(dirs, claims))
    # Same targets, same paths, same order in every engine process.
    assert seen["prefill"] == seen["decode"]
    _, entry = engine_container(docs, "entrypoint")
    assert flag_values(serve_args(entry), "--kv-store") == []


def test_no_network_policy_restricts_ucx(rendered):
    # KV blocks move between prefill and decode pods over UCX on ports it picks itself.
    _, docs = rendered
    assert of_kind(docs, "NetworkPolicy") == []
    for role in ("prefill", "decode"):
        _, c = engine_container(docs, role)
        tls = [e["value"] for e in c["env"] if e["name"] == "UCX_TLS"]
        assert tls and "tcp" in tls[0].split(","), role


def test_engine_threads_follow_the_cpu_limit(rendered):
    args, docs = rendered
    cpu = option(args, "--engine-cpu", "4")
    want = int(cpu[:-1]) // 1000 if cpu.endswith("m") else int(cpu)
    for role in ("prefill", "decode"):
        _, c = engine_container(docs, role)
        assert c["resources"]["limits"]["cpu"] == cpu
        assert flag_values(serve_args(c), "--threads") == [str(want)]


def test_api_key_comes_from_a_secret():
    docs = objects(PARAMETER_SETS["scaled"])
    _, c = engine_container(docs, "entrypoint")
    assert flag_values(serve_args(c), "--api-key") == ["$(DEEPINFER_API_KEY)"]
    env = {e["name"]: e for e in c["env"]}
    assert env["DEEPINFER_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "deepinfer-api-key", "key": "api-key"}
    _, c = engine_container(objects([]), "entrypoint")
    assert "--api-key" not in serve_args(c)


def test_output_dir_holds_the_same_objects(tmp_path):
    args = PARAMETER_SETS["scaled"]
    render(*args, "--output-dir", tmp_path)
    files = sorted(tmp_path.glob("*.yaml"))  # the numbered names sort in apply order
    assert [f.name for f in files] == ["00-namespace.yaml", "10-storage.yaml", "20-model-pull-job.yaml",
                                       "30-prefill.yaml", "31-decode.yaml", "40-entrypoint.yaml"]
    from_dir = [d for f in files for d in yaml.safe_load_all(f.read_text()) if d is not None]
    assert from_dir == objects(args)
    assert [d["kind"] for d in from_dir][0] == "Namespace"


@pytest.mark.parametrize("args, message", [
    (["--namespace", "Bad_Name"], "--namespace"),
    (["--prefill-replicas", "-1"], "--prefill-replicas"),
    (["--kv-store-size", "lots"], "--kv-store-size"),
    (["--engine-memory", "16GB"], "--engine-memory"),
    (["--model", "/data/models/x"], "--model"),
    (["--model", "/var/lib/deepinfer/models/../../etc"], "--model"),
    (["--model", "no spaces"], "--model"),
    (["--image", "two words"], "--image"),
    (["--grace-seconds", "5"], "--grace-seconds"),
])
def test_bad_parameters_are_refused(args, message):
    r = render(*args, check=False)
    assert r.returncode == 2 and r.stdout == ""
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_template_placeholder_without_a_value_is_an_error():
    spec = importlib.util.spec_from_file_location("deploy_render", RENDER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.fill("a: {{x}}\n", {"x": "v: 1"}, "t") == 'a: "v: 1"\n'
    assert mod.fill("l:\n  {{b}}\n", {"b": mod.Block(["- 1", "- 2"])}, "t") == "l:\n  - 1\n  - 2\n"
    with pytest.raises(mod.RenderError, match="t:2: no value for"):
        mod.fill("a: 1\nb: {{typo}}\n", {"x": 1}, "t")


# --- against a local build -------------------------------------------------------------------

def help_flags(*subcommand):
    r = subprocess.run([str(BINARY), *subcommand, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", r.stdout))


def test_every_serve_flag_of_the_manifests_is_one_the_binary_knows():
    if not BINARY.exists():
        pytest.skip(f"{BINARY} is missing: run `make` to check the manifests' flags against it")
    known = help_flags("serve")
    assert {"--model", "--port", "--host", "--role"} <= known  # the help text parses
    used = set()
    for name, args in PARAMETER_SETS.items():
        for _, spec, _ in pod_specs(objects(args)):
            for c in containers(spec):
                sargs = serve_args(c)
                if sargs is not None:
                    used |= {a for a in sargs if a.startswith("--")}
    assert used - PENDING_SERVE_FLAGS <= known, sorted(used - PENDING_SERVE_FLAGS - known)
    # The pending two are exactly the entrypoint's, as agreed for issue 25.
    assert PENDING_SERVE_FLAGS <= used
    # The pull Job and the wait-for-model step use `deepinfer pull NAME` and `pull --list`.
    assert "--list" in help_flags("pull")


def dockerfile_runtime_packages():
    stages = re.split(r"(?m)^FROM\s", DOCKERFILE.read_text())
    runtime = stages[-1]
    assert "build/bin/deepinfer" in runtime, "the runtime stage does not copy the binary"
    text = re.sub(r"\\\n", " ", runtime)
    packages = set()
    for m in re.finditer(r"apt-get install ([^&;\n]*)", text):
        packages |= {w for w in m.group(1).split() if not w.startswith("-")}
    return packages


def test_dockerfile_builds_as_the_readme_says():
    text = DOCKERFILE.read_text()
    stages = re.findall(r"(?m)^FROM\s+(\S+)", text)
    assert stages[0] == "debian:12" and stages[-1].startswith("debian:12"), stages
    build = re.split(r"(?m)^FROM\s", text)[1]
    assert "scripts/install_deps.sh" in build and "cmake --build" in build
    assert "COPY --from=build /src/build/bin/deepinfer" in text
    assert {"python3", "python3-pip", "ca-certificates"} <= dockerfile_runtime_packages()  # `deepinfer pull`
    assert re.search(r"(?m)^USER 10001", text)  # the manifests' runAsUser


def debian_packages_of(paths):
    """{path: the Debian package owning that library file, or None}, trying each path as ldd
    printed it, its real path and both sides of the /usr merge; one dpkg query for all of them
    (dpkg reads its whole file database on every start)."""
    candidates = {}
    for path in paths:
        candidates[path] = []
        for p in (path, os.path.realpath(path)):
            candidates[path] += [p, "/usr" + p if not p.startswith("/usr/") else p[len("/usr"):]]
    every = sorted({c for cs in candidates.values() for c in cs})
    r = subprocess.run(["dpkg", "-S", *every], capture_output=True, text=True)  # 1 when some are unowned
    owner = {}
    for line in r.stdout.splitlines():
        if not line.startswith("diversion") and ": " in line:
            package, owned = line.split(": ", 1)
            owner.setdefault(owned, package.split(":")[0].split(",")[0])
    return {path: next((owner[c] for c in cs if c in owner), None) for path, cs in candidates.items()}


def test_dockerfile_runtime_stage_installs_what_the_binary_links_to():
    if not BINARY.exists():
        pytest.skip(f"{BINARY} is missing: run `make` to check the Dockerfile against what it links to")
    if shutil.which("dpkg") is None or shutil.which("readelf") is None:
        pytest.skip("dpkg or readelf is missing: the library check needs a Debian build host")
    # The binary's own DT_NEEDED libraries: their packages' Depends bring in the rest.
    dyn = subprocess.run(["readelf", "-d", str(BINARY)], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    assert needed, "the binary links no shared library at all?"
    ldd = subprocess.run(["ldd", str(BINARY)], capture_output=True, text=True, check=True).stdout
    resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M))
    for path in re.findall(r"^\s*(/\S+) \(0x", ldd, re.M):  # the loader: no "=>"
        resolved.setdefault(path.rsplit("/", 1)[-1], path)
    installed = dockerfile_runtime_packages()
    for lib in needed:
        assert resolved.get(lib, "not") != "not", f"ldd cannot resolve {lib}"
    owners = debian_packages_of(resolved[lib] for lib in needed)
    missing = []
    for lib in needed:
        package = owners[resolved[lib]]
        assert package is not None, f"no Debian package owns {resolved[lib]}"
        if package not in installed:
            missing.append(f"{package} ({lib})")
    assert not missing, f"deploy/Dockerfile's runtime stage lacks {', '.join(missing)}"


def test_dockerfile_runtime_packages_exist_in_debian():
    if shutil.which("apt-cache") is None:
        pytest.skip("apt-cache is missing: not a Debian host")
    # One query for all (apt-cache loads its package lists on every start, seconds each): it
    # shows the packages it has and says "Unable to locate" on stderr for the others.
    wanted = sorted(dockerfile_runtime_packages())
    shown = subprocess.run(["apt-cache", "show", "--no-all-versions", "libc6", *wanted],
                           capture_output=True, text=True).stdout
    known = set(re.findall(r"(?m)^Package: (\S+)$", shown))
    if "libc6" not in known:
        pytest.skip("apt has no package lists here (run apt-get update)")
    unknown = sorted(set(wanted) - known)
    assert not unknown, f"deploy/Dockerfile installs packages Debian does not have: {unknown}"
