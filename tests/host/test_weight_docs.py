#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""docs/weight-updates.md against the pinned releases
(tests/engines/pins.txt, fetched into build/engines by `make check`):
every row of its sources table names a definition that is in that file
of that release, and every piece of code the row quotes is in that
definition; the versions the page names are the pinned ones; the README
and each integration guide link to the page. Prints TAP."""

import ast
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))
from gstest import Tap, check, REPO  # noqa: E402
import fetch  # noqa: E402
import pinned  # noqa: E402

DOC = os.path.join(REPO, "docs", "weight-updates.md")
TESTS = ["every cited definition is in its pinned release, with the code "
         "quoted",
         "the versions the page names are the pinned ones",
         "README and the integration guides link to the page"]


def rows():
    text = open(DOC).read()
    m = re.search(r"<!-- sources -->\n(.*?)<!-- /sources -->", text, re.S)
    check(m, "no <!-- sources --> table")
    out = []
    for ln in m.group(1).splitlines()[2:]:
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        check(len(cells) == 4, f"row {ln!r}")
        out.append((cells[0], cells[1], cells[2],
                    re.findall(r"`([^`]+)`", cells[3])))
    check(len(out) >= 10, f"{len(out)} rows")
    return out


def cited():
    bad = []
    for rel_name, path, qual, needles in rows():
        try:
            node = pinned.find(rel_name, path, qual)
        except pinned.Drift as e:
            bad.append(str(e))
            continue
        seg = ast.get_source_segment(pinned.release(rel_name).text(path),
                                     node)
        for n in needles:
            if n not in seg:
                bad.append(f"{node.where}: {qual} has no {n!r}")
    check(not bad, "\n".join(bad))


def versions():
    text = open(DOC).read()
    pins = {p.name: p.version for p in fetch.pins()}
    named = re.findall(r"(SGLang|vLLM|verl|OpenRLHF) (\d+\.\d+\.\d+)", text)
    check(named, "no versions named")
    for name, ver in named:
        check(pins[name.lower()] == ver,
              f"the page names {name} {ver}, pins.txt {pins[name.lower()]}")


def linked():
    for f in ["README.md", "docs/integrations/sglang.md",
              "docs/integrations/vllm.md", "docs/integrations/trainers.md"]:
        with open(os.path.join(REPO, f)) as fh:
            check("weight-updates.md" in fh.read(), f"{f}: no link")


def main():
    tap = Tap(TESTS)
    for name, fn in zip(TESTS, [cited, versions, linked]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
