#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The pinned engine and trainer releases (tests/engines/pins.txt) as
`make check` fetched them: each is unpacked at its pinned version, from
the file whose sha256 is pinned, and the README names the versions."""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))
from gstest import Tap, REPO  # noqa: E402
import fetch  # noqa: E402
import pinned  # noqa: E402

TESTS = ["every pinned release is unpacked from its pinned file",
         "the README names each pinned version"]


def t_unpacked():
    for p in fetch.pins():
        r = pinned.release(p.name)
        assert (r.version, r.file, r.sha256) == (p.version, p.file, p.sha256), \
            f"{r.root}/.pinned says {r.version} {r.file}, pins.txt {p.line}"
        assert os.listdir(r.root) != [".pinned"], f"{r.root} is empty"


def t_readme():
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    for p in fetch.pins():
        assert re.search(rf"{re.escape(p.name)}[^\n]*\b{re.escape(p.version)}\b",
                         text, re.I), \
            f"README.md does not name {p.name} {p.version}"


def main():
    tap = Tap(TESTS)
    tap.run(TESTS[0], t_unpacked)
    tap.run(TESTS[1], t_readme)
    tap.done()


if __name__ == "__main__":
    main()
