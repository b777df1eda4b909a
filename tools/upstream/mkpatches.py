#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Write the module as a `git format-patch` series against a kernel tree.

    tools/upstream/mkpatches.py KSRC OUT      (make patches KSRC=... OUT=...)

KSRC is a clean kernel source tree (linux-source-6.12 or 7.3; it is only
read). OUT gets 000N-*.patch, which `git am` applies to that tree. The
series adds, each patch building on its own:

  1. include/uapi/linux/gpusleep.h, its ioctl-number.rst line, MAINTAINERS
  2. the netlink spec and the uAPI header generated from it
  3. drivers/misc/gpusleep/: the driver (kmod/ as it is, with the generated
     netlink code), Kconfig and Makefile, hooked into drivers/misc
  4. Documentation/userspace-api/gpusleep.rst, in the index
  5. tools/testing/selftests/drivers/gpusleep/: the kselftests of tests/vm/
     (*.c and their headers), a Makefile and the config fragment

Every file is copied from this repository, none rewritten; the only text
made here is what the kernel tree needs around them (Kconfig, the
driver's Makefile, whose object list is read from ./Kbuild, the selftests'
Makefile and config, the index, ioctl-number and MAINTAINERS lines, the
commit messages). kmod/conftest.sh is not copied: in the tree kmod/compat.h
adapts nothing (GS_CONFTEST is not defined).

The commits are made in a scratch git repository holding only the files
the series changes (OUT/.base), so the kernel tree itself needs no git.
Author: $GPUSLEEP_PATCH_AUTHOR ("Name <email>"), else this repository's
git identity.
"""

import os
import re
import shutil
import subprocess
import sys

REPO = os.path.normpath(os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", ".."))

# Files of the tree the series changes (the base of the scratch repository).
BASE_FILES = [
    "MAINTAINERS",
    "Documentation/userspace-api/index.rst",
    "Documentation/userspace-api/ioctl/ioctl-number.rst",
    "drivers/misc/Kconfig",
    "drivers/misc/Makefile",
    "tools/testing/selftests/Makefile",
]

TITLE = "GPUSLEEP GPU MEMORY RELEASE DRIVER"


def die(msg):
    print(f"mkpatches: {msg}", file=sys.stderr)
    sys.exit(1)


def git(work, *args, env=None):
    r = subprocess.run(["git", "-C", work] + list(args), capture_output=True,
                       text=True, env=env)
    if r.returncode:
        die(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def author():
    a = os.environ.get("GPUSLEEP_PATCH_AUTHOR")
    if a:
        m = re.fullmatch(r"\s*(.+?)\s*<([^>]+)>\s*", a)
        if not m:
            die("GPUSLEEP_PATCH_AUTHOR must be 'Name <email>'")
        return m.group(1), m.group(2)
    name = subprocess.run(["git", "-C", REPO, "config", "user.name"],
                          capture_output=True, text=True).stdout.strip()
    mail = subprocess.run(["git", "-C", REPO, "config", "user.email"],
                          capture_output=True, text=True).stdout.strip()
    return name or "gpusleep", mail or "gpusleep@localhost"


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


# The files ynl-gen-c makes of the spec, as the target tree's own
# generator writes them (its text differs between kernels), so that the
# tree's ynl-regen.sh finds nothing to change: gen_files() fills this.
GENERATED = {}


def copy(src_rel, work, dst_rel):
    dst = os.path.join(work, dst_rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(GENERATED.get(src_rel, os.path.join(REPO, src_rel)), dst)


def gen_files(ksrc, out):
    """Regenerate the netlink files with ksrc's generator, into out."""
    r = subprocess.run([os.path.join(REPO, "tools/ynl/nlgen.sh"), "--out",
                        out, ksrc], text=True, capture_output=True)
    if r.returncode:
        die(f"tools/ynl/nlgen.sh --out {out} {ksrc}: {r.stderr.strip()}")
    if r.stdout.startswith("SKIP"):
        print(f"mkpatches.py: {ksrc} has no usable ynl-gen-c: the series "
              "carries the committed generated files", file=sys.stderr)
        return
    for rel in ("kmod/gpusleep-nl-gen.c", "kmod/gpusleep-nl-gen.h",
                "uapi/linux/gpusleep_netlink.h"):
        GENERATED[rel] = os.path.join(out, os.path.basename(rel))


def version():
    m = re.search(r'^PACKAGE_VERSION="(.*)"', read(os.path.join(REPO,
                                                                "dkms.conf")),
                  re.M)
    if not m:
        die("no PACKAGE_VERSION in dkms.conf")
    return m.group(1)


def kbuild_objects():
    """The module's objects, as ./Kbuild lists them (without kmod/)."""
    text = read(os.path.join(REPO, "Kbuild")).replace("\\\n", " ")
    m = re.search(r"^gpusleep-y\s*:=(.*)$", text, re.M)
    if not m:
        die("no gpusleep-y in Kbuild")
    return [o.replace("kmod/", "") for o in m.group(1).split()]


# ------------------------------------------------------------ MAINTAINERS
def maintainers(work, files, who):
    """Add (or rewrite) the driver's entry with F: lines for files."""
    path = os.path.join(work, "MAINTAINERS")
    lines = read(path).split("\n")
    name, mail = who
    entry = [TITLE, f"M:\t{name} <{mail}>", "L:\tlinux-kernel@vger.kernel.org",
             "S:\tMaintained"]
    entry += [f"F:\t{f}" for f in sorted(files)]
    # drop our entry if there, then insert it in alphabetical order
    if TITLE in lines:
        i = lines.index(TITLE)
        j = i
        while j < len(lines) and lines[j] != "":
            j += 1
        del lines[i:j + 1]
    start = next((i for i, ln in enumerate(lines)
                  if ln.startswith("3C59X NETWORK DRIVER")), None)
    if start is None:
        die("MAINTAINERS: no list of entries found")
    at = None
    for i in range(start, len(lines) - 1):
        ln = lines[i]
        if (ln and lines[i - 1] == "" and re.match(r"^[A-Z]:\t", lines[i + 1])
                and ln > TITLE):
            at = i
            break
    if at is None:
        die("MAINTAINERS: no place for the entry")
    lines[at:at] = entry + [""]
    write(path, "\n".join(lines))


# ------------------------------------------------------------ the patches
def uapi_patch(work):
    copy("uapi/linux/gpusleep.h", work, "include/uapi/linux/gpusleep.h")
    path = os.path.join(work,
                        "Documentation/userspace-api/ioctl/ioctl-number.rst")
    lines = read(path).split("\n")
    # Each field where the table's ruler starts its column, as in every
    # other row (tools/upstream/check_ioctl_number.py checks it).
    ruler = next((ln for ln in lines
                  if re.match(r"^=+( +=+){3}\s*$", ln)), None)
    if ruler is None:
        die("ioctl-number.rst: no table ruler")
    cols = [m.start() for m in re.finditer(r"=+", ruler)]
    line = ""
    for col, text in zip(cols, ("0xBC", "00-3F", "uapi/linux/gpusleep.h",
                                "gpusleep GPU memory release driver")):
        line = line.ljust(col) + text
    at = next((i for i, ln in enumerate(lines)
               if re.match(r"^0x([0-9A-F]{2})\s", ln) and
               int(ln[2:4], 16) > 0xBC), None)
    if at is None:
        die("ioctl-number.rst: no place for 0xBC")
    lines.insert(at, line)
    write(path, "\n".join(lines))


def netlink_patch(work):
    copy("Documentation/netlink/specs/gpusleep.yaml", work,
         "Documentation/netlink/specs/gpusleep.yaml")
    copy("uapi/linux/gpusleep_netlink.h", work,
         "include/uapi/linux/gpusleep_netlink.h")


KCONFIG = """\
# SPDX-License-Identifier: GPL-2.0

config GPUSLEEP
	tristate "gpusleep: release and resume GPU memory by tag"
	depends on NET && EVENTFD && SYSFS
	help
	  A misc device, /dev/gpusleep, through which an inference engine
	  lets another process (an RL trainer, an operator) ask it to
	  release the GPU memory behind some of its tags (weights, KV
	  cache) and to resume it later. The driver orders the steps, times
	  them out, ties each domain to the engine's file descriptor and
	  reports every state transition (sysfs, the "gpusleep" generic
	  netlink family); it manages no memory itself.

	  To compile this driver as a module, choose M here: the module
	  will be called gpusleep.

config GPUSLEEP_FAULT_INJECTION
	bool "gpusleep: fault injection for testing"
	depends on GPUSLEEP && FAULT_INJECTION
	help
	  Let the gpusleep selftests make the driver's allocations and
	  steps fail on demand (debugfs fault attributes), to test its
	  error paths. This is for testing only; a production kernel
	  leaves it off.
"""


def driver_patch(work):
    d = "drivers/misc/gpusleep"
    srcs = sorted(f for f in os.listdir(os.path.join(REPO, "kmod"))
                  if re.fullmatch(r"[\w-]+\.[ch]", f) and f != "gs_conftest.h")
    for f in srcs:
        copy(f"kmod/{f}", work, f"{d}/{f}")
    objs = kbuild_objects()
    missing = [o for o in objs if o[:-2] + ".c" not in srcs]
    if missing:
        die(f"Kbuild names objects with no source: {missing}")
    fault = "fault.o" if "fault.c" in srcs else None
    mk = ["# SPDX-License-Identifier: GPL-2.0", "",
          "obj-$(CONFIG_GPUSLEEP) += gpusleep.o", ""]
    line = "gpusleep-y := "
    for o in objs:
        if len(line) + len(o) > 72:
            mk.append(line + "\\")
            line = "\t      "
        line += o + " "
    mk.append(line.rstrip())
    if fault:
        mk += [f"gpusleep-$(CONFIG_GPUSLEEP_FAULT_INJECTION) += {fault}",
               "ccflags-$(CONFIG_GPUSLEEP_FAULT_INJECTION) += "
               "-DGS_FAULT_INJECTION"]
    mk += ["",
           f"ccflags-y += -DGPUSLEEP_VERSION='\"{version()}\"'",
           "",
           "# The generator writes the multicast group table of a",
           "# genetlink-legacy family but not the family that would use it:",
           "# genl.c has both.",
           "CFLAGS_gpusleep-nl-gen.o := "
           "$(call cc-disable-warning,unused-const-variable)", ""]
    write(os.path.join(work, d, "Makefile"), "\n".join(mk))
    write(os.path.join(work, d, "Kconfig"), KCONFIG)

    path = os.path.join(work, "drivers/misc/Kconfig")
    text = read(path)
    i = text.rindex("endmenu")
    write(path, text[:i] + 'source "drivers/misc/gpusleep/Kconfig"\n' +
          text[i:])
    path = os.path.join(work, "drivers/misc/Makefile")
    text = read(path)
    if not text.endswith("\n"):
        text += "\n"
    write(path, text + "obj-$(CONFIG_GPUSLEEP)\t\t+= gpusleep/\n")


def docs_patch(work):
    copy("Documentation/userspace-api/gpusleep.rst", work,
         "Documentation/userspace-api/gpusleep.rst")
    path = os.path.join(work, "Documentation/userspace-api/index.rst")
    lines = read(path).split("\n")
    try:
        at = lines.index("   gpio/index") + 1
    except ValueError:
        at = next((i + 3 for i, ln in enumerate(lines)
                   if ln == "Devices and I/O"), None)
        if at is None:
            die("userspace-api/index.rst: no Devices and I/O section")
        at += 2
    lines.insert(at, "   gpusleep")
    write(path, "\n".join(lines))


SELFTEST_MAKEFILE = """\
# SPDX-License-Identifier: GPL-2.0
#
# The driver's kselftests: load gpusleep (CONFIG_GPUSLEEP, see config)
# and run them as root. They use the kselftest harness and the uAPI
# headers (make headers).

# -isystem for the harness: its macros trip -Wall (misleading indentation)
CFLAGS += -std=gnu11 -O2 -Wall -Wno-sign-compare -pthread
CFLAGS += -isystem ../../ $(KHDR_INCLUDES)
LDLIBS += -lpthread

TEST_GEN_PROGS := {progs}

EXTRA_CLEAN :=

include ../../lib.mk

$(TEST_GEN_PROGS): {headers}
"""

SELFTEST_CONFIG = """\
CONFIG_GPUSLEEP=m
CONFIG_EVENTFD=y
CONFIG_NET=y
CONFIG_SYSFS=y
"""


def selftests_patch(work):
    d = "tools/testing/selftests/drivers/gpusleep"
    vm = os.path.join(REPO, "tests/vm")
    progs = sorted(f[:-2] for f in os.listdir(vm) if f.endswith(".c"))
    headers = sorted(f for f in os.listdir(vm) if f.endswith(".h"))
    for f in [p + ".c" for p in progs] + headers:
        copy(f"tests/vm/{f}", work, f"{d}/{f}")
    write(os.path.join(work, d, "Makefile"),
          SELFTEST_MAKEFILE.format(progs=" \\\n\t".join(progs),
                                   headers=" ".join(headers)))
    write(os.path.join(work, d, "config"), SELFTEST_CONFIG)
    path = os.path.join(work, "tools/testing/selftests/Makefile")
    lines = read(path).split("\n")
    last = max(i for i, ln in enumerate(lines)
               if ln.startswith("TARGETS += drivers/"))
    lines.insert(last + 1, "TARGETS += drivers/gpusleep")
    write(path, "\n".join(lines))


PATCHES = [
    (uapi_patch, ["include/uapi/linux/gpusleep.h"],
     "gpusleep: add the uAPI header",
     """\
gpusleep lets an inference engine release the GPU memory behind some of
its tags (weights, KV cache) when another process asks, and resume it
later; the driver orders the steps and tracks the engine's lifetime, it
manages no memory itself.

Add the ioctl uAPI of /dev/gpusleep (magic 0xBC): fixed-size records of
__u8 to __u64 with explicit padding, reserved fields that must be zero,
and GPUSLEEP_IOC_API to negotiate the version. Register the magic in
ioctl-number.rst and add a MAINTAINERS entry."""),
    (netlink_patch, ["Documentation/netlink/specs/gpusleep.yaml",
                     "include/uapi/linux/gpusleep_netlink.h"],
     "gpusleep: add the generic netlink spec",
     """\
Describe the "gpusleep" generic netlink family in YAML: GET (do and
dump), RELEASE and RESUME, and STATE_NTF on the "events" multicast
group. The uAPI header is generated from it by ynl-gen-c
(tools/net/ynl/ynl-regen.sh)."""),
    (driver_patch, ["drivers/misc/gpusleep/"],
     "misc: gpusleep: add the driver",
     """\
Add the gpusleep driver: the misc device with its domains, operations,
tags and groups, the sysfs class, and the generic netlink family, whose
request policies and op table (gpusleep-nl-gen.[ch]) are generated from
the spec. kmod/compat.h adapts older kernels out of the tree; in the
tree it is empty of effect."""),
    (docs_patch, ["Documentation/userspace-api/gpusleep.rst"],
     "Documentation: gpusleep: add the userspace API page",
     """\
Describe domains, tags, the operations and their reasons, the ioctl
records and the netlink family for userspace."""),
    (selftests_patch, ["tools/testing/selftests/drivers/gpusleep/"],
     "selftests: gpusleep: add driver tests",
     """\
Add the driver's kselftests (kselftest harness): the ioctl contract,
ownership and access, limits, groups, tags, sysfs, procfs and netlink,
with a fuzzer. They need the module loaded and root."""),
]


def main():
    if len(sys.argv) != 3:
        die("usage: mkpatches.py KSRC OUT")
    ksrc, out = (os.path.abspath(a) for a in sys.argv[1:])
    for f in BASE_FILES:
        if not os.path.isfile(os.path.join(ksrc, f)):
            die(f"{ksrc} is not a kernel source tree (no {f})")
    who = author()
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".patch"):
            os.unlink(os.path.join(out, f))
    work = os.path.join(out, ".base")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    gen_files(ksrc, os.path.join(out, ".gen"))
    for f in BASE_FILES:
        dst = os.path.join(work, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.join(ksrc, f), dst)
    env = dict(os.environ, GIT_AUTHOR_NAME=who[0], GIT_AUTHOR_EMAIL=who[1],
               GIT_COMMITTER_NAME=who[0], GIT_COMMITTER_EMAIL=who[1],
               GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
               GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "base", env=env)
    base = git(work, "rev-parse", "HEAD").strip()
    files = []
    for fn, new_files, subject, body in PATCHES:
        fn(work)
        files += new_files
        maintainers(work, files, who)
        git(work, "add", "-A")
        msg = (f"{subject}\n\n{body}\n\n"
               f"Signed-off-by: {who[0]} <{who[1]}>\n")
        r = subprocess.run(["git", "-C", work, "commit", "-q", "-F", "-"],
                           input=msg, text=True, capture_output=True, env=env)
        if r.returncode:
            die(f"git commit: {r.stderr.strip()}")
    names = git(work, "format-patch", "-q", "--no-signature", "-o", out,
                f"{base}..HEAD")
    for n in names.split():
        print(os.path.relpath(n, os.getcwd()) if n.startswith(REPO) else n)


if __name__ == "__main__":
    main()
