#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The docs' pictures drawn by tools/figures: each committed SVG is what
its script draws (run here into a scratch directory and compared byte
for byte: regenerate with the command the failure names), parses as
SVG, and shows what it must:
- docs/deployment.svg: the names the deployment files use (the
  DaemonSets, the Secret, the node label, the CDI spec's path and device
  name), each found in those files too, so that a rename there fails
  here.
Prints TAP."""

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
from gstest import Tap, check, REPO  # noqa: E402

FIG = os.path.join(REPO, "tools", "figures")
NS = "{http://www.w3.org/2000/svg}"


def drawn(script, committed, *inputs):
    """Draw with script into a scratch file; it must equal committed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, os.path.basename(committed))
        p = subprocess.run([sys.executable, os.path.join(FIG, script)] +
                           [os.path.join(REPO, i) for i in inputs] + [out],
                           capture_output=True, text=True)
        check(p.returncode == 0, p.stderr)
        with open(out) as f:
            new = f.read()
    with open(os.path.join(REPO, committed)) as f:
        old = f.read()
    check(new == old, f"{committed} is not what tools/figures/{script} "
          f"draws: run python3 tools/figures/{script} "
          f"{' '.join(inputs + (committed,))}")
    root = ET.fromstring(new)
    check(root.tag == NS + "svg", root.tag)
    return root, " ".join(t.text or "" for t in root.iter(NS + "text"))


def deployment():
    _, text = drawn("deployment.py", "docs/deployment.svg")
    files = ""
    for d in ("packaging/kubernetes", "packaging/cdi", "packaging/containers"):
        for f in sorted(os.listdir(os.path.join(REPO, d))):
            with open(os.path.join(REPO, d, f)) as fh:
                files += fh.read()
    for name in ("gpusleep-driver", "gpusleep-exporter", "gpusleep-mok",
                 "gpusleep.io/node=true", "/etc/cdi/gpusleep.yaml",
                 "/dev/gpusleep", "gpusleepctl metrics --textfile",
                 "hostNetwork"):
        check(name in text, f"the picture does not show {name!r}")
        flat = name.replace("gpusleep.io/node=true",
                            'gpusleep.io/node: "true"')
        check(flat in files or name in files,
              f"{name!r} is in the picture, not in the deployment files")


def main():
    tests = [("docs/deployment.svg: drawn by its script, names as "
              "deployed", deployment)]
    tap = Tap([t for t, _ in tests])
    for name, fn in tests:
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
