#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""What packaging/ ships for containers and Kubernetes (docs/deployment.md):
- the CDI spec of /dev/gpusleep (packaging/cdi/gpusleep.yaml) against the
  published CDI schema (schema.json and defs.json of Debian's
  golang-github-container-orchestrated-devices-container-device-interface-dev
  0.5.2, downloaded once with apt-get download into build/cdi and checked
  against its sha256), strictly (no property the schema does not
  declare), and against the rules of that package's Go code: the spec
  version (specs-go CurrentVersion) and the vendor, class and device
  names (pkg/cdi/qualified-device.go);
- the Kubernetes manifests (packaging/kubernetes/*.yaml) against the
  Kubernetes API schemas of the oldest and newest versions named below,
  strictly, with kubernetes-validate (pinned in
  tools/pytools/requirements.txt, in build/pytools/venv), and a manifest
  with one misspelt field fails it;
- the ConfigMap carries the same spec, the example pod's CDI annotation
  names that device under a key CDI's AnnotationKey makes, and the
  Containerfiles copy files that exist and install the entrypoint the
  DaemonSet runs.
Prints TAP."""

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
from gstest import Tap, check, REPO  # noqa: E402

CDI_PKG = ("golang-github-container-orchestrated-devices-container-device-"
           "interface-dev", "0.5.2-2",
           "afb0e01c0c98e8398cdb3b4b731efd98816e6e81ef43db8673bcb7774dd27628")
CDI_SRC = ("usr/share/gocode/src/github.com/container-orchestrated-devices/"
           "container-device-interface")
CDI_DIR = os.path.join(REPO, "build", "cdi")
SPEC = os.path.join(REPO, "packaging", "cdi", "gpusleep.yaml")
K8S = sorted(glob.glob(os.path.join(REPO, "packaging", "kubernetes",
                                    "*.yaml")))
# The oldest Kubernetes release still maintained when this was written
# and the newest the pinned kubernetes-validate knows.
K8S_VERSIONS = ["1.31.0", "1.37.0"]
TESTS = ["the CDI spec against the CDI schema, strictly",
         "the CDI spec against CDI's rules: version, vendor, class, names",
         "the manifests against the Kubernetes API schemas, strictly",
         "a misspelt field fails kubernetes-validate",
         "the ConfigMap's spec, the pod's CDI annotation, the images"]


def cdi_root():
    """build/cdi/root: Debian's package, fetched and unpacked once."""
    root = os.path.join(CDI_DIR, "root")
    if os.path.isdir(os.path.join(root, CDI_SRC)):
        return os.path.join(root, CDI_SRC)
    os.makedirs(CDI_DIR, exist_ok=True)
    name, ver, sha = CDI_PKG
    debs = glob.glob(os.path.join(CDI_DIR, f"{name}_*.deb"))
    if not debs:
        p = subprocess.run(["apt-get", "download", f"{name}={ver}"],
                           cwd=CDI_DIR, capture_output=True, text=True)
        debs = glob.glob(os.path.join(CDI_DIR, f"{name}_*.deb"))
        check(debs, f"apt-get download {name}={ver}: {p.stderr}")
    with open(debs[0], "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    check(got == sha, f"{debs[0]}: sha256 {got}, pinned {sha}")
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", debs[0], root], check=True)
    return os.path.join(root, CDI_SRC)


def spec():
    with open(SPEC) as f:
        return yaml.safe_load(f)


def cdi_schema():
    import jsonschema
    d = os.path.join(cdi_root(), "schema")
    with open(os.path.join(d, "schema.json")) as f:
        schema = json.load(f)
    with open(os.path.join(d, "defs.json")) as f:
        defs = json.load(f)
    resolver = jsonschema.RefResolver(base_uri="file://" + d + "/",
                                      referrer=schema,
                                      store={"defs.json": defs})
    return schema, defs, resolver


def declared(node, schema, defs, where, bad):
    """Every key of node is a property its schema declares (the CDI schema
    does not say additionalProperties: false; a typo would pass it)."""
    while "$ref" in schema:
        ref = schema["$ref"].split("#/definitions/")[-1]
        schema = defs["definitions"][ref]
    if isinstance(node, dict):
        props = schema.get("properties", {})
        for k, v in node.items():
            if k not in props:
                bad.append(f"{where}.{k}: not in the schema")
            else:
                declared(v, props[k], defs, f"{where}.{k}", bad)
    elif isinstance(node, list) and "items" in schema:
        for i, v in enumerate(node):
            declared(v, schema["items"], defs, f"{where}[{i}]", bad)


def cdi_valid():
    import jsonschema
    schema, defs, resolver = cdi_schema()
    s = spec()
    jsonschema.validate(s, schema, resolver=resolver)
    bad = []
    declared(s, schema, defs, "spec", bad)
    check(not bad, "; ".join(bad))
    # the strict walk catches what the schema lets through
    bad = []
    declared({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [
        {"name": "x", "containerEdits": {"deviceNode": []}}]},
        schema, defs, "typo", bad)
    check(bad, "a misspelt containerEdits key went through")


def _version(v):
    return tuple(int(x) for x in v.split("."))


def cdi_rules():
    root = cdi_root()
    with open(os.path.join(root, "specs-go", "config.go")) as f:
        current = re.search(r'CurrentVersion = "([0-9.]+)"', f.read())
    check(current, "no CurrentVersion in specs-go/config.go")
    s = spec()
    check(_version(s["cdiVersion"]) <= _version(current.group(1)),
          f"cdiVersion {s['cdiVersion']} is newer than the package's "
          f"{current.group(1)}")
    # pkg/cdi/qualified-device.go: ValidateVendorName, ValidateClassName,
    # ValidateDeviceName
    vendor, _, cls = s["kind"].partition("/")
    check(re.fullmatch(r"[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?", vendor),
          f"vendor {vendor!r}")
    check(re.fullmatch(r"[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?", cls),
          f"class {cls!r}")
    for d in s["devices"]:
        check(re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?",
                           d["name"]), f"device name {d['name']!r}")
        for n in d["containerEdits"].get("deviceNodes", []):
            check(n["path"].startswith("/"), n)
    nodes = [n["path"] for d in s["devices"]
             for n in d["containerEdits"]["deviceNodes"]]
    check(nodes == ["/dev/gpusleep"], nodes)


def kubernetes_validate(files, version):
    p = subprocess.run([os.path.join(REPO, "tools", "pytools.sh")],
                       capture_output=True, text=True)
    check(p.returncode == 0, p.stderr)
    return subprocess.run([os.path.join(p.stdout.strip(),
                                        "kubernetes-validate"),
                           "-k", version, "--strict", "--no-warn"] + files,
                          capture_output=True, text=True)


def k8s_valid():
    check(len(K8S) >= 2, K8S)
    for v in K8S_VERSIONS:
        p = kubernetes_validate(K8S, v)
        check(p.returncode == 0, f"Kubernetes {v}:\n{p.stdout}{p.stderr}")
        n = sum(1 for f in K8S for d in yaml.safe_load_all(open(f)) if d)
        check(p.stdout.count(" passed for resource ") == n,
              f"{n} resources, output:\n{p.stdout}")


def k8s_typo():
    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "bad.yaml")
        with open(K8S[0]) as f:
            text = f.read()
        check("hostNetwork: true" in text, "no hostNetwork to misspell")
        with open(bad, "w") as f:
            f.write(text.replace("hostNetwork: true", "hostNetwrok: true", 1))
        p = kubernetes_validate([bad], K8S_VERSIONS[-1])
        check(p.returncode != 0 and "hostNetwrok" in p.stdout + p.stderr,
              p.stdout + p.stderr)


def consistent():
    docs = [d for f in K8S for d in yaml.safe_load_all(open(f)) if d]
    cms = [d for d in docs if d["kind"] == "ConfigMap" and
           d["metadata"]["name"] == "gpusleep-cdi"]
    check(len(cms) == 1, "one ConfigMap gpusleep-cdi")
    check(yaml.safe_load(cms[0]["data"]["gpusleep.yaml"]) == spec(),
          "the ConfigMap's spec differs from packaging/cdi/gpusleep.yaml")
    s = spec()
    names = {f"{s['kind']}={d['name']}" for d in s["devices"]}
    pods = [d for d in docs if d["kind"] == "Pod"]
    check(pods, "no example pod")
    for pod in pods:
        ann = {k: v for k, v in pod["metadata"].get("annotations", {}).items()
               if k.startswith("cdi.k8s.io/")}
        check(ann, f"pod {pod['metadata']['name']}: no CDI annotation")
        for k, v in ann.items():
            # AnnotationKey(plugin, deviceID): "cdi.k8s.io/" plugin "_" id
            check(re.fullmatch(r"cdi\.k8s\.io/[A-Za-z0-9][A-Za-z0-9_.-]*_"
                               r"[A-Za-z0-9_.-]*[A-Za-z0-9]", k) and
                  len(k) - len("cdi.k8s.io/") <= 63, f"annotation key {k}")
            check(set(v.split(",")) <= names, f"{k}: {v} not in {names}")
    for cf in glob.glob(os.path.join(REPO, "packaging", "containers",
                                     "*.Containerfile")):
        for ln in open(cf):
            m = re.match(r"COPY (.+) (\S+)$", ln.strip())
            if not m:
                continue
            for src in m.group(1).split():
                if src.startswith("build/"):
                    continue	# what make builds
                check(glob.glob(os.path.join(REPO, src)),
                      f"{os.path.basename(cf)}: COPY {src}: no such file")
    ds = [d for d in docs if d["kind"] == "DaemonSet" and
          d["metadata"]["name"] == "gpusleep-driver"][0]
    cmd = ds["spec"]["template"]["spec"]["containers"][0]["command"][0]
    check(f"/usr/local/sbin/gpusleep-driver" == cmd and
          f" {cmd}\n" in open(os.path.join(
              REPO, "packaging", "containers",
              "driver.Containerfile")).read(), f"driver command {cmd}")


def main():
    tap = Tap(TESTS)
    for name, fn in zip(TESTS, [cdi_valid, cdi_rules, k8s_valid, k8s_typo,
                                consistent]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
