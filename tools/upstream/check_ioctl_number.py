#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Check the registration of gpusleep's ioctl range in a kernel tree's
Documentation/userspace-api/ioctl/ioctl-number.rst (the patched copy of
tests/patches.sh):

    tools/upstream/check_ioctl_number.py RST UAPI_HEADER

- one row for the magic of UAPI_HEADER (GPUSLEEP_IOC_MAGIC), naming the
  header, in the table's order of codes;
- each of its fields starts where the table's ruler starts that column
  (the simple table parses, and reads like its neighbours);
- its sequence range covers every command number the header defines, and
  no other row of that code overlaps it.

Prints what is wrong and exits 1; exits 0 silently when all holds."""

import re
import sys


def columns(lines):
    """The start of each column, from the table's first ruler line."""
    for ln in lines:
        if re.match(r"^=+( +=+){3}\s*$", ln):
            return [m.start() for m in re.finditer(r"=+", ln)]
    raise SystemExit("no table ruler in the file")


def header_numbers(path):
    text = open(path).read()
    magic = re.search(r"#define\s+GPUSLEEP_IOC_MAGIC\s+(0x[0-9A-Fa-f]+)",
                      text)
    if not magic:
        raise SystemExit(f"{path}: no GPUSLEEP_IOC_MAGIC")
    nrs = [int(n, 16) for n in
           re.findall(r"_IO[RW]*\(\s*GPUSLEEP_IOC_MAGIC\s*,\s*(0x[0-9A-Fa-f]+)",
                      text)]
    return int(magic.group(1), 16), nrs


def seq_range(field):
    if field == "all":
        return 0, 0xFF
    m = re.match(r"^([0-9A-Fa-f]{2})(?:-([0-9A-Fa-f]{2}))?$", field)
    if not m:
        return None
    lo = int(m.group(1), 16)
    return lo, int(m.group(2) or m.group(1), 16)


def main():
    rst, hdr = sys.argv[1], sys.argv[2]
    lines = open(rst).read().split("\n")
    cols = columns(lines)
    magic, nrs = header_numbers(hdr)
    code = "0x%02X" % magic
    errors = []
    rows = [(i, ln) for i, ln in enumerate(lines)
            if re.match(r"^0x[0-9A-Fa-f]{2}\s", ln)]
    mine = [(i, ln) for i, ln in rows if "gpusleep.h" in ln]
    if len(mine) != 1:
        print(f"{rst}: {len(mine)} rows name gpusleep.h, not 1")
        return 1
    at, row = mine[0]
    fields = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*",
                                                          row)]
    if len(fields) < 4:
        errors.append(f"row {row!r}: fewer than 4 fields")
    else:
        for (start, text), col, name in zip(fields, cols,
                                            ("code", "seq", "include",
                                             "comment")):
            if start != col:
                errors.append(f"{name} {text!r} starts at column {start}, "
                              f"the table's column at {col}")
    if not row.startswith(code + " "):
        errors.append(f"row {row!r}: not code {code} (GPUSLEEP_IOC_MAGIC)")
    rng = seq_range(fields[1][1]) if len(fields) > 1 else None
    if not rng:
        errors.append(f"row {row!r}: no sequence range")
    else:
        out = [n for n in nrs if not rng[0] <= n <= rng[1]]
        if out:
            errors.append("command numbers outside %s: %s" %
                          (fields[1][1], ", ".join("0x%02X" % n
                                                   for n in out)))
        for i, ln in rows:
            if i == at or not ln.lower().startswith(code.lower() + " "):
                continue
            other = seq_range(ln.split()[1])
            if other and other[0] <= rng[1] and rng[0] <= other[1]:
                errors.append(f"overlaps {ln.strip()!r}")
    codes = [int(ln[2:4], 16) for i, ln in rows]
    k = [i for i, _ in rows].index(at)
    if (k and codes[k - 1] > magic) or \
            (k + 1 < len(codes) and codes[k + 1] < magic):
        errors.append(f"row {row!r}: out of the table's order of codes")
    for e in errors:
        print(f"{rst}: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
