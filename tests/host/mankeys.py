# SPDX-License-Identifier: GPL-2.0
"""gpusleepctl(8)'s JSON key lists, for the tests that compare them with
what gpusleepctl prints (tests/host/test_docs.py on the host,
tests/vm/ctl_test.py in the VM).

In the man page a list is the line after a comment line
    .\\" keys NAME
and its keys are the words in bold (\\fBkey\\fR). Keys of objects whose
keys are the domain's tag names (bytes, freed_bytes, generation, and the
agent's report: policy, content, verified, size_bytes, mapped_bytes,
host_bytes) are data,
not keys: json_keys() leaves them out. doc_files() names the pages whose
example sessions the tests check (README.md and docs/*.md)."""

import os
import re

REPO = os.path.normpath(os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", ".."))
MAN = os.path.join(REPO, "tools", "gpusleepctl.8")
PER_TAG = {"bytes", "freed_bytes", "generation", "policy", "content",
           "verified", "size_bytes", "mapped_bytes", "host_bytes"}


def man_keys(name, path=MAN):
    """The bold words of the key list NAME."""
    lines = open(path).read().split("\n")
    for i, ln in enumerate(lines):
        if ln.strip() == '.\\" keys ' + name:
            return set(re.findall(r"\\fB([a-z_]+)\\fR", lines[i + 1]))
    raise KeyError("gpusleepctl.8 has no key list %r" % name)


def json_keys(obj, parent=None):
    """Every key of a JSON value, at any depth (tag names excepted)."""
    keys = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            if parent in PER_TAG and not isinstance(v, (dict, list)):
                continue
            keys.add(k)
            keys |= json_keys(v, k)
    elif isinstance(obj, list):
        for v in obj:
            keys |= json_keys(v, parent)
    return keys


def doc_files():
    """README.md, then docs/*.md in name order (absolute paths)."""
    yield os.path.join(REPO, "README.md")
    d = os.path.join(REPO, "docs")
    for f in sorted(os.listdir(d)):
        if f.endswith(".md"):
            yield os.path.join(d, f)
