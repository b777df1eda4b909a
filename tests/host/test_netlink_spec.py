#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The netlink spec is the single source: check the uAPI headers and the
kernel's generated netlink code against Documentation/netlink/specs/gpusleep.yaml.

- the committed generated files (kmod/gpusleep-nl-gen.[ch],
  uapi/linux/gpusleep_netlink.h) are what the kernel's ynl-gen-c (kernel
  and uapi modes, linux-source-6.12's: tools/ynl/nlgen.sh --check) makes
  of the spec (skipped when there is no such tree);
- every definition (enums and flag sets shared with <linux/gpusleep.h>),
  attribute set and operation of the spec names a C constant of the same
  value, and no GPUSLEEP_A_*/GPUSLEEP_CMD_* constant lacks a spec entry;
- the family, version and multicast group names agree;
- the kernel's own generator (ynl-gen-c --mode user, of every kernel
  source tree under build/ or $GPUSLEEP_YNL_SRC) makes a library from the
  spec that builds with the uAPI headers and libynl, and the C client
  tools/ynl/gpusleep-ynl-client.c with it, without an error or a warning
  (tools/ynl/build.sh; skipped when there is no such tree).
The C values come from the compiler (a probe program built here)."""

import glob
import os
import re
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SPEC = os.path.join(REPO, "Documentation/netlink/specs/gpusleep.yaml")
UAPI = os.path.join(REPO, "uapi")

results = []


def check(name, ok, why=""):
    results.append((name, ok, why))


def cname(prefix, name):
    return (prefix + name).upper().replace("-", "_")


def spec_constants(spec):
    """{C name: value} the spec implies, with the section each is from."""
    want = {}
    for d in spec.get("definitions", []):
        prefix = d.get("name-prefix", d["name"] + "-")
        if d["type"] not in ("enum", "flags"):
            continue
        value = 0
        for e in d["entries"]:
            if isinstance(e, dict):
                n = e["name"]
                value = e.get("value", value)
            else:
                n = e
            want[cname(prefix, n)] = ("definitions/" + d["name"],
                                      1 << value if d["type"] == "flags"
                                      else value)
            value += 1
    for s in spec.get("attribute-sets", []):
        prefix = s.get("name-prefix", s["name"] + "-")
        value = 0
        for a in s["attributes"]:
            value = a.get("value", value)
            want[cname(prefix, a["name"])] = ("attribute-sets/" + s["name"],
                                             value)
            value += 1
    ops = spec["operations"]
    prefix = ops.get("name-prefix", "")
    value = 1
    for op in ops["list"]:
        value = op.get("value", value)
        want[cname(prefix, op["name"])] = ("operations", value)
        value += 1
    return want


def c_values(names, extra=()):
    """Values of C constants, as the compiler sees them."""
    src = "#include <stdio.h>\n#include <linux/gpusleep.h>\n" \
          "#include <linux/gpusleep_netlink.h>\nint main(void)\n{\n"
    for n in list(names) + list(extra):
        src += f'\tprintf("{n} %lld\\n", (long long)({n}));\n'
    src += "\treturn 0;\n}\n"
    with tempfile.TemporaryDirectory() as d:
        c = os.path.join(d, "probe.c")
        exe = os.path.join(d, "probe")
        with open(c, "w") as f:
            f.write(src)
        r = subprocess.run(["cc", "-I" + UAPI, "-o", exe, c],
                           capture_output=True, text=True)
        if r.returncode:
            return None, r.stderr
        out = subprocess.run([exe], capture_output=True, text=True).stdout
    return {ln.split()[0]: int(ln.split()[1])
            for ln in out.splitlines()}, ""


def header_names(pattern):
    names = set()
    for h in ("gpusleep.h", "gpusleep_netlink.h"):
        with open(os.path.join(UAPI, "linux", h)) as f:
            names |= set(re.findall(pattern, f.read()))
    return names


def ynl_trees():
    """Kernel source trees with the YNL generator, newest first."""
    if os.environ.get("GPUSLEEP_YNL_SRC"):
        roots = [os.environ["GPUSLEEP_YNL_SRC"]]
    else:
        roots = sorted(glob.glob(os.path.join(REPO, "build/kernels/*/src")) +
                       glob.glob(os.path.join(REPO,
                                              "build/debug-kernel/src-*")),
                       reverse=True)
    return [r for r in roots if any(os.path.isfile(os.path.join(r, g)) for g in
                                    ("tools/net/ynl/pyynl/ynl_gen_c.py",
                                     "tools/net/ynl/ynl-gen-c.py"))]


def check_generator():
    trees = ynl_trees()
    if not trees:
        results.append(("the kernel's ynl-gen-c makes a library that builds",
                        None, "no kernel source with tools/net/ynl under "
                        "build/ (tools/deps.sh --kernels) and no "
                        "$GPUSLEEP_YNL_SRC"))
        return
    for tree in trees:
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([os.path.join(REPO, "tools/ynl/build.sh"), d,
                                tree], capture_output=True, text=True)
        out = (r.stdout + r.stderr).strip()
        check(f"ynl-gen-c --mode user of {os.path.relpath(tree, REPO)}: "
              "library and client build, no error or warning",
              r.returncode == 0 and not out, out[-3000:])


def check_kernel_generated():
    name = ("kernel netlink code and uAPI header are ynl-gen-c's output "
            "from the spec (make nlgen)")
    r = subprocess.run([os.path.join(REPO, "tools/ynl/nlgen.sh"), "--check"],
                       capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.startswith("SKIP: "):
        results.append((name, None, r.stdout[6:].strip()))
        return
    out = (r.stdout + r.stderr).strip()
    check(name, r.returncode == 0 and not out, out[-3000:])


def main():
    check_kernel_generated()
    check_generator()
    with open(SPEC) as f:
        spec = yaml.safe_load(f)
    want = spec_constants(spec)
    # the header's attribute and command constants, MAX and private ones out
    declared = {n for n in header_names(r"\b(GPUSLEEP_(?:A|CMD)_[A-Z0-9_]+)")
                if not re.search(r"_MAX$|^__|_$", n)}
    missing_in_spec = sorted(declared - set(want))
    check("every GPUSLEEP_A_*/GPUSLEEP_CMD_* of the header is in the spec",
          not missing_in_spec, f"not in the spec: {missing_in_spec}")

    # and the header's members of each shared definition (the YNL client
    # would crash on a value it has no name for)
    for d in spec.get("definitions", []):
        prefix = cname(d.get("name-prefix", ""), "")
        have = {n for n in header_names(r"\b(" + prefix + r"[A-Z0-9_]+)")
                if not re.search(r"_(MAX|ALL|MASK|SIZE_VER0)$|_$", n)}
        extra = sorted(have - set(want))
        check(f"every {prefix}* of the header is in the spec's "
              f"{d['name']}", not extra, f"not in the spec: {extra}")

    names = [n for n in want]
    vals, err = c_values([n for n in names if n in
                          header_names(r"\b(GPUSLEEP_[A-Z0-9_]+)")],
                         extra=("GPUSLEEP_OPF_RELEASE_MASK",
                                "GPUSLEEP_OPF_RESUME_MASK",
                                "GPUSLEEP_TAG_ALL"))
    if vals is None:
        check("the probe of the header's values builds", False, err[-400:])
        return
    absent = sorted(n for n in names if n not in vals)
    check("every constant the spec implies exists in the uAPI headers",
          not absent, f"absent: {absent}")
    wrong = sorted(f"{n}: spec {want[n][1]} ({want[n][0]}), header {vals[n]}"
                   for n in names if n in vals and vals[n] != want[n][1])
    check("every spec value equals the header's", not wrong,
          "; ".join(wrong))

    # family, version, multicast group
    with open(os.path.join(UAPI, "linux", "gpusleep_netlink.h")) as f:
        nlh = f.read()
    fam = re.search(r'GPUSLEEP_GENL_NAME\s+"([^"]+)"', nlh)
    grp = re.search(r'GPUSLEEP_MCGRP_EVENTS\s+"([^"]+)"', nlh)
    groups = [g["name"] for g in spec.get("mcast-groups", {}).get("list", [])]
    check("family and multicast group names agree",
          fam and fam.group(1) == spec["name"] and grp and
          groups == [grp.group(1)],
          f"header {fam and fam.group(1)}/{grp and grp.group(1)}, "
          f"spec {spec['name']}/{groups}")


if __name__ == "__main__":
    main()
    print("TAP version 13")
    print(f"1..{len(results)}")
    failed = 0
    for i, (name, ok, why) in enumerate(results, 1):
        if ok is None:
            print(f"ok {i} {name} # SKIP {why}")
            continue
        print(f"{'ok' if ok else 'not ok'} {i} {name}")
        if not ok:
            failed += 1
            print(f"# {why}")
    sys.exit(1 if failed else 0)
