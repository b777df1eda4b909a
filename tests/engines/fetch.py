#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Fetch the pinned engine and trainer releases (tests/engines/pins.txt)
into build/engines/ and unpack them for the tests to read.

    tests/engines/fetch.py [--out DIR] [--offline]

Each pinned file is downloaded once into DIR/dl/ and kept: a later run,
or one without a network, uses it. A wheel comes through
`pip download --no-deps --only-binary=:all:` with the interpreter, ABI and
platform tags of its pinned file name, so any machine gets the same file.
An sdist (vLLM's) cannot: pip download builds an sdist's metadata, which
for vLLM means cmake, torch and CUDA; it is read from PyPI's simple index
(PEP 691 JSON) and downloaded as is. Either way the file's sha256 must be
the pinned one, or nothing is unpacked.

Each release is unpacked into DIR/src/NAME/ (a wheel as its files, an
sdist as its top directory's contents), with DIR/src/NAME/.pinned holding
"NAME VERSION FILE SHA256"; an unpacked tree whose .pinned matches is kept.
Prints one line per release; exit 1 naming what failed.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
PINS = os.path.join(HERE, "pins.txt")
INDEX = os.environ.get("GPUSLEEP_PYPI_SIMPLE", "https://pypi.org/simple")


class Pin:
    def __init__(self, name, version, file, sha256):
        self.name, self.version, self.file, self.sha256 = \
            name, version, file, sha256

    @property
    def line(self):
        return f"{self.name} {self.version} {self.file} {self.sha256}"


def pins(path=PINS):
    out = []
    with open(path) as f:
        for n, ln in enumerate(f, 1):
            ln = ln.split("#", 1)[0].split()
            if not ln:
                continue
            if len(ln) != 4:
                raise SystemExit(f"{path}:{n}: want NAME VERSION FILE SHA256")
            out.append(Pin(*ln))
    return out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def wheel_tags(file):
    """(python, abi, platform) of a wheel file name."""
    parts = file[:-len(".whl")].split("-")
    return parts[-3], parts[-2], parts[-1]


def pip_download(p, dest):
    py, abi, plat = wheel_tags(p.file)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q",
           "--only-binary=:all:", "-d", dest]
    if py.startswith("cp"):
        cmd += ["--implementation", "cp", "--python-version", py[2:3] + "." + py[3:]]
    if abi != "none":
        cmd += ["--abi", abi]
    if plat != "any":
        cmd += ["--platform", plat]
    cmd.append(f"{p.name}=={p.version}")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode:
        raise RuntimeError(f"pip download {p.name}=={p.version} failed:\n"
                           + r.stdout.strip())


def index_download(p, dest):
    url = f"{INDEX}/{p.name}/"
    req = urllib.request.Request(
        url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        files = json.load(r)["files"]
    match = [f for f in files if f["filename"] == p.file]
    if not match:
        raise RuntimeError(f"{url}: no file {p.file}")
    with urllib.request.urlopen(match[0]["url"], timeout=600) as r, \
            open(os.path.join(dest, p.file), "wb") as f:
        shutil.copyfileobj(r, f, 1 << 20)


def fetch(p, dl, offline):
    path = os.path.join(dl, p.file)
    if os.path.exists(path) and sha256(path) == p.sha256:
        return path, "cached"
    if offline:
        raise RuntimeError(f"{path} is not there and --offline was given")
    with tempfile.TemporaryDirectory(dir=dl) as tmp:
        if p.file.endswith(".whl"):
            pip_download(p, tmp)
        else:
            index_download(p, tmp)
        got = os.path.join(tmp, p.file)
        if not os.path.exists(got):
            raise RuntimeError(f"downloaded {os.listdir(tmp)}, not the "
                               f"pinned {p.file}")
        h = sha256(got)
        if h != p.sha256:
            raise RuntimeError(f"{p.file}: sha256 {h}, pinned {p.sha256} "
                               "(a changed release: check it, then pin it)")
        os.replace(got, path)
    return path, "downloaded"


def unpack(p, path, src):
    dest = os.path.join(src, p.name)
    stamp = os.path.join(dest, ".pinned")
    try:
        with open(stamp) as f:
            if f.read().strip() == p.line:
                return dest
    except OSError:
        pass
    shutil.rmtree(dest, ignore_errors=True)
    tmp = dest + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    if p.file.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            z.extractall(tmp)
    else:
        with tarfile.open(path) as t:
            top = os.path.commonpath(t.getnames())
            if hasattr(tarfile, "data_filter"):	# Python >= 3.11.4
                t.extractall(tmp, filter="data")
            else:
                t.extractall(tmp)
        inner = os.path.join(tmp, top)
        for e in os.listdir(inner):
            os.rename(os.path.join(inner, e), os.path.join(tmp, e))
        os.rmdir(inner)
    with open(os.path.join(tmp, ".pinned"), "w") as f:
        f.write(p.line + "\n")
    os.rename(tmp, dest)
    return dest


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(REPO, "build", "engines"))
    ap.add_argument("--offline", action="store_true",
                    help="use only what is already downloaded")
    a = ap.parse_args()
    dl, src = os.path.join(a.out, "dl"), os.path.join(a.out, "src")
    os.makedirs(dl, exist_ok=True)
    os.makedirs(src, exist_ok=True)
    failed = []
    for p in pins():
        try:
            path, how = fetch(p, dl, a.offline)
            unpack(p, path, src)
            print(f"engines: {p.name} {p.version}: {how}, unpacked in "
                  f"{os.path.relpath(os.path.join(src, p.name), REPO)}")
        except Exception as e:	# noqa: one line per release, then exit 1
            failed.append(p.name)
            print(f"engines: {p.name} {p.version}: {e}", file=sys.stderr)
    if failed:
        print(f"engines: failed: {' '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
