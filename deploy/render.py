#!/usr/bin/env python3
"""Renders the Kubernetes manifests of a disaggregated DeepInfer deployment (deploy/k8s/).

    deploy/render.py --model smollm2-135m-instruct --prefill-replicas 2 --decode-replicas 4 \
        > deepinfer.yaml                      # one multi-document stream
    deploy/render.py ... --output-dir out/    # one file per object group, for kubectl apply -f

Python standard library only. The templates are plain YAML with two kinds of placeholder:
`{{name}}` as a whole value becomes that value, JSON-quoted (so any string is safe YAML);
a line holding nothing but `{{name}}` becomes a block of lines at that line's indentation
(possibly none). Every placeholder must have a value: a typo is an error, never an empty string.
Errors exit with status 2 and one line on stderr, like the deepinfer CLI.
"""
import argparse
import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
TEMPLATES = HERE / "k8s"

HOME = "/var/lib/deepinfer"          # $DEEPINFER_HOME in every pod
MODELS_DIR = HOME + "/models"        # the model volume
KV_STORE_DIR = "/var/lib/deepinfer-kv"  # target i is mounted at KV_STORE_DIR/i

# The two engine pools: the entrypoint reaches them at http://NAME:PORT (headless Services).
POOLS = {
    "prefill": {"name": "deepinfer-prefill", "port": 8101},
    "decode": {"name": "deepinfer-decode", "port": 8201},
}

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
BLOCK_LINE = re.compile(r"^(\s*)\{\{\s*([A-Za-z_]\w*)\s*\}\}\s*$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
CATALOGUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RenderError(Exception):
    pass


class Block(list):
    """Lines that replace a line holding only its placeholder."""


def fill(text, values, source):
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        m = BLOCK_LINE.match(line)
        if m and isinstance(values.get(m.group(2)), Block):
            indent = m.group(1)
            out.extend(indent + l if l else l for l in values[m.group(2)])
            continue

        def scalar(mm):
            key = mm.group(1)
            if key not in values:
                raise RenderError(f"{source}:{lineno}: no value for {{{{{key}}}}}")
            v = values[key]
            if isinstance(v, Block):
                raise RenderError(f"{source}:{lineno}: {{{{{key}}}}} is a block; give it a line of its own")
            return json.dumps(v)

        out.append(PLACEHOLDER.sub(scalar, line))
    return "\n".join(out) + "\n"


def template(name, values):
    path = TEMPLATES / name
    return fill(path.read_text(), values, f"deploy/k8s/{name}")


def literal_block(text):
    """A YAML list item holding `text` as a literal block scalar."""
    return Block(["- |"] + ["  " + l if l else "" for l in text.rstrip("\n").splitlines()])


def quantity(s, what):
    if not QUANTITY.match(s):
        raise RenderError(f"{what}: '{s}' is not a Kubernetes quantity (e.g. 4, 500m, 16Gi)")
    return s


def threads_for(cpu):
    """Compute threads for a CPU limit: whole cores, at least one."""
    if cpu.endswith("m"):
        return max(1, int(cpu[:-1]) // 1000)
    return max(1, int(float(cpu)))


def check_args(a):
    if not DNS_LABEL.match(a.namespace):
        raise RenderError(f"--namespace: '{a.namespace}' is not a DNS label (lower case, digits, '-')")
    if not a.image or any(c.isspace() for c in a.image):
        raise RenderError(f"--image: '{a.image}' is not an image reference")
    for flag in ("prefill_replicas", "decode_replicas", "entrypoint_replicas", "kv_store_targets"):
        if getattr(a, flag) < 0:
            raise RenderError(f"--{flag.replace('_', '-')}: must be 0 or more")
    if a.startup_minutes < 1:
        raise RenderError("--startup-minutes: must be 1 or more")
    if a.grace_seconds < 30:
        raise RenderError("--grace-seconds: must be 30 or more (the preStop sleep alone takes 10)")
    if a.model.startswith("/"):
        if not a.model.startswith(MODELS_DIR + "/") or "/../" in a.model + "/":
            raise RenderError(f"--model: a path must lie on the model volume, under {MODELS_DIR}/")
    elif not CATALOGUE_NAME.match(a.model):
        raise RenderError(f"--model: '{a.model}' is neither a catalogue name nor an absolute path "
                          f"under {MODELS_DIR}/")
    for flag in ("kv_store_size", "model_volume_size", "engine_cpu", "engine_memory",
                 "entrypoint_cpu", "entrypoint_memory"):
        quantity(getattr(a, flag), "--" + flag.replace("_", "-"))
    if a.storage_class is not None and not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", a.storage_class):
        raise RenderError(f"--storage-class: '{a.storage_class}' is not a StorageClass name")
    if a.api_key_secret is not None and not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", a.api_key_secret):
        raise RenderError(f"--api-key-secret: '{a.api_key_secret}' is not a Secret name")
    if a.kv_cache_gb is not None and a.kv_cache_gb <= 0:
        raise RenderError("--kv-cache-gb: must be positive")


def pull_job_name(model):
    slug = re.sub(r"[^a-z0-9-]+", "-", model.lower()).strip("-")
    return ("deepinfer-pull-" + slug)[:63].rstrip("-")


def render(a):
    """Returns [(file name, YAML text)] in apply order."""
    check_args(a)
    storage_class = Block([] if a.storage_class is None
                          else [f"storageClassName: {json.dumps(a.storage_class)}"])
    common = {
        "namespace": a.namespace,
        "image": a.image,
        "image_pull_policy": a.image_pull_policy,
        "model": a.model,
        "storage_class": storage_class,
        "wait_for_model_script": literal_block((TEMPLATES / "wait-for-model.sh").read_text()),
    }
    docs = []
    if a.namespace != "default":
        docs.append(("00-namespace.yaml", template("namespace.yaml", common)))

    storage = [template("model-pvc.yaml", {**common, "model_volume_size": a.model_volume_size})]
    kv_dirs = []
    kv_mounts, kv_volumes = Block(), Block()
    for i in range(a.kv_store_targets):
        pvc = f"deepinfer-kv-store-{i}"
        kv_dirs.append(f"{KV_STORE_DIR}/{i}")
        storage.append(template("kv-store-pvc.yaml", {**common, "kv_pvc_name": pvc,
                                                      "kv_store_size": a.kv_store_size}))
        kv_mounts += [f"- name: kv-store-{i}", f"  mountPath: {KV_STORE_DIR}/{i}"]
        kv_volumes += [f"- name: kv-store-{i}", "  persistentVolumeClaim:", f"    claimName: {pvc}"]
    docs.append(("10-storage.yaml", "---\n".join(storage)))

    if not a.model.startswith("/"):
        docs.append(("20-model-pull-job.yaml", template(
            "model-pull-job.yaml", {**common, "pull_job_name": pull_job_name(a.model)})))

    engine_args = []
    for d in kv_dirs:
        engine_args += ["--kv-store", d]
    if a.kv_cache_gb is not None:
        engine_args += ["--kv-cache-gb", f"{a.kv_cache_gb:g}"]
    replicas = {"prefill": a.prefill_replicas, "decode": a.decode_replicas}
    for n, (role, pool) in enumerate(POOLS.items()):
        docs.append((f"{30 + n}-{role}.yaml", template("engine.yaml", {
            **common,
            "name": pool["name"],
            "role": role,
            "port": pool["port"],
            "port_string": str(pool["port"]),
            "replicas": replicas[role],
            "threads": str(threads_for(a.engine_cpu)),
            "cpu": a.engine_cpu,
            "memory": a.engine_memory,
            "grace_seconds": a.grace_seconds,
            "startup_failure_threshold": a.startup_minutes * 6,  # startupProbe period: 10 s
            "extra_args": Block("- " + json.dumps(x) for x in engine_args),
            "kv_store_mounts": kv_mounts,
            "kv_store_volumes": kv_volumes,
        })))

    entry_args, entry_env = [], Block()
    if a.api_key_secret is not None:
        # Kubernetes expands $(VAR) in args from the container's env.
        entry_args += ["--api-key", "$(DEEPINFER_API_KEY)"]
        entry_env += ["- name: DEEPINFER_API_KEY", "  valueFrom:", "    secretKeyRef:",
                      f"      name: {json.dumps(a.api_key_secret)}", "      key: api-key"]
    docs.append(("40-entrypoint.yaml", template("entrypoint.yaml", {
        **common,
        "replicas": a.entrypoint_replicas,
        "cpu": a.entrypoint_cpu,
        "memory": a.entrypoint_memory,
        "grace_seconds": a.grace_seconds,
        "extra_args": Block("- " + json.dumps(x) for x in entry_args),
        "extra_env": entry_env,
    })))
    return docs


def parser():
    p = argparse.ArgumentParser(description="Render the DeepInfer Kubernetes manifests (deploy/README.md).")
    p.add_argument("--model", default="smollm2-135m-instruct",
                   help="catalogue name (pulled by a Job) or a path under "
                        f"{MODELS_DIR}/ on the model volume (default: smollm2-135m-instruct)")
    p.add_argument("--image", default="deepinfer:latest", help="container image (default deepinfer:latest)")
    p.add_argument("--image-pull-policy", default="IfNotPresent", choices=["Always", "IfNotPresent", "Never"])
    p.add_argument("--namespace", default="deepinfer", help="namespace (default deepinfer; 'default' renders no Namespace)")
    p.add_argument("--prefill-replicas", type=int, default=1, help="prefill engines (default 1)")
    p.add_argument("--decode-replicas", type=int, default=1, help="decode engines (default 1)")
    p.add_argument("--entrypoint-replicas", type=int, default=1, help="entrypoints (default 1)")
    p.add_argument("--kv-store-size", default="100Gi", help="size of each KV store target volume (default 100Gi)")
    p.add_argument("--kv-store-targets", type=int, default=1,
                   help="KV store targets, one ReadWriteMany volume each (default 1; 0: no KV store)")
    p.add_argument("--model-volume-size", default="20Gi", help="size of the model volume (default 20Gi)")
    p.add_argument("--storage-class", default=None,
                   help="StorageClass of the volumes (default: the cluster's default); it must offer ReadWriteMany")
    p.add_argument("--engine-cpu", default="4", help="CPU request = limit of each engine pod (default 4)")
    p.add_argument("--engine-memory", default="8Gi", help="memory request = limit of each engine pod (default 8Gi)")
    p.add_argument("--entrypoint-cpu", default="1", help="CPU of each entrypoint pod (default 1)")
    p.add_argument("--entrypoint-memory", default="1Gi", help="memory of each entrypoint pod (default 1Gi)")
    p.add_argument("--kv-cache-gb", type=float, default=None, help="engines' --kv-cache-gb (default: the engine's)")
    p.add_argument("--startup-minutes", type=int, default=30,
                   help="how long an engine may take to load its model before it is restarted (default 30)")
    p.add_argument("--grace-seconds", type=int, default=300,
                   help="terminationGracePeriodSeconds: time to finish running requests after SIGTERM (default 300)")
    p.add_argument("--api-key-secret", default=None,
                   help="Secret whose 'api-key' key the entrypoint requires on every /v1 request")
    p.add_argument("--output-dir", type=pathlib.Path, default=None,
                   help="write one file per object group here instead of one stream to stdout")
    return p


def main(argv=None):
    p = parser()
    a = p.parse_args(argv)
    try:
        docs = render(a)
    except RenderError as e:
        print(f"render.py: {e}", file=sys.stderr)
        return 2
    if a.output_dir is None:
        sys.stdout.write("---\n".join(text for _, text in docs))
        return 0
    a.output_dir.mkdir(parents=True, exist_ok=True)
    for name, text in docs:
        (a.output_dir / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
