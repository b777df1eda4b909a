#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""docs/integrations/trainers.md against the pinned trainers, verl 0.9.1
and OpenRLHF 0.11.2 (tests/engines/pins.txt), read from their sources.
Each call site the guide cites carries a marker

    <!-- cite: RELEASE FILE QUALNAME [calls=a,b] [tags=x,y] [strings=s,t] -->

and is checked: the file has QUALNAME (a function or method), which
calls each of `calls`, holds a list literal of exactly the strings
`tags`, in that order, and whose source holds each of `strings`; a cite
that no longer holds fails with the release's file:line. Every verl or
OpenRLHF source path the guide names must be cited; the guide names the
pinned versions, and the slime commit it was read at (slime is not on
PyPI: not pinned, not checked here)."""

import ast
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))
from gstest import Tap, check, REPO  # noqa: E402
import pinned  # noqa: E402

GUIDE = os.path.join(REPO, "docs", "integrations", "trainers.md")
RELEASES = {"verl": "verl/", "openrlhf": "openrlhf/"}
TESTS = ["the guide names the pinned verl and OpenRLHF, and slime's commit",
         "every cited call site is in the pinned verl",
         "every cited call site is in the pinned OpenRLHF",
         "every verl and OpenRLHF source path the guide names is cited"]


def guide():
    with open(GUIDE) as f:
        return f.read()


def cites():
    out = []
    for m in re.finditer(r"<!-- cite: (.*?) -->", guide()):
        words = m.group(1).split()
        if len(words) < 3:	# the syntax, as the guide shows it
            continue
        opts = dict(w.split("=", 1) for w in words[3:])
        out.append((words[0], words[1], words[2],
                    {k: v.split(",") for k, v in opts.items()}))
    return out


def versions():
    text = guide()
    for name, label in (("verl", "verl"), ("openrlhf", "OpenRLHF")):
        v = pinned.release(name).version
        check(f"{label} {v}" in text, f"the guide does not name {label} {v}")
    check(re.search(r"THUDM/slime.*\b[0-9a-f]{40}\b", text, re.S),
          "the guide does not name the slime commit it read")


def one(release, rel, qual, opts):
    node = pinned.find(release, rel, qual)	# Drift: release file:line
    bad = []
    called = {(c.func.attr if isinstance(c.func, ast.Attribute) else
               getattr(c.func, "id", None))
              for c in ast.walk(node) if isinstance(c, ast.Call)}
    for name in opts.get("calls", []):
        if name not in called:
            bad.append(f"{node.where}: {qual} no longer calls {name}")
    if "tags" in opts:
        lists = [[e.value for e in n.elts] for n in ast.walk(node)
                 if isinstance(n, (ast.List, ast.Tuple)) and n.elts and
                 all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                     for e in n.elts)]
        if opts["tags"] not in lists:
            bad.append(f"{node.where}: {qual} has no tags {opts['tags']} "
                       f"(its lists: {lists})")
    src = ast.unparse(node)
    for s in opts.get("strings", []):
        if s not in src:
            bad.append(f"{node.where}: {qual} no longer holds {s!r}")
    return bad


def sites(release):
    mine = [c for c in cites() if c[0] == release]
    check(len(mine) >= 4, f"{len(mine)} cites of {release} in the guide")
    bad = []
    for _, rel, qual, opts in mine:
        try:
            bad += one(release, rel, qual, opts)
        except pinned.Drift as e:
            bad.append(str(e))
    check(not bad, "\n".join(bad))


def paths():
    text = guide()
    cited = {(c[0], c[1]) for c in cites()}
    bad = []
    for release, prefix in RELEASES.items():
        for p in sorted(set(re.findall(rf"`({re.escape(prefix)}[\w/]+\.py)`",
                                       text))):
            if (release, p) not in cited:
                bad.append(f"{p}: named, not cited")
    check(not bad, "\n".join(bad))


def main():
    tap = Tap(TESTS)
    tap.run(TESTS[0], versions)
    tap.run(TESTS[1], sites, "verl")
    tap.run(TESTS[2], sites, "openrlhf")
    tap.run(TESTS[3], paths)
    tap.done()


if __name__ == "__main__":
    main()
