#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The C client built from the library the kernel's ynl-gen-c generates
from the spec (tools/ynl/build.sh, into build/ynl/): it dumps a domain
this test creates, and sees the notification of a release it runs (the
domain entering released, with the operation's result). This script
plays engine and agent by hand. Prints TAP; SKIPs when the client was not
built (no kernel source with tools/net/ynl on the host)."""

import fcntl
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import ctl_test as ct  # noqa: E402  (the ioctl helpers, engine and agent)

CLIENT = os.path.join(REPO, "build/ynl/gpusleep-ynl-client")
IOC_RELEASE = ct._ioc(3, 0x10, 48)             # struct gpusleep_op
OPF_NONBLOCK = 1 << 1
BOUND = 120


def main():
    t = ct.Tap()
    print("TAP version 13", flush=True)
    if not os.path.exists(ct.DEV):
        print("1..0 # SKIP no /dev/gpusleep")
        return 0
    if not os.access(CLIENT, os.X_OK):
        print("1..0 # SKIP build/ynl/gpusleep-ynl-client not built: no "
              "kernel source with tools/net/ynl on the host "
              "(tools/ynl/build.sh)")
        return 0
    dev = os.open(ct.DEV, os.O_RDWR)
    name = "ynlc-%d" % os.getpid()
    engine, dom = ct.create(dev, name, caps=1)
    agent = ct.attach(dev, dom, ct.ROLE_AGENT)
    cl = subprocess.Popen([CLIENT, "--until", "released", "--timeout",
                           str(BOUND)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    lines = []
    for ln in cl.stdout:                        # up to "ready": subscribed
        lines.append(ln.rstrip("\n"))
        if ln.strip() == "ready":
            break
    t.check("the client dumps the domain, decoded", any(
        ln.startswith("domain id=%d name=%s " % (dom, name)) and
        " state=awake " in ln for ln in lines), "\n".join(lines))

    fcntl.ioctl(engine, IOC_RELEASE, bytearray(struct.pack(
        "<IIIIQII2Q", 1, OPF_NONBLOCK, 0, 0, 0, 0, 0, 0, 0)))
    ct.answer(engine, ct.EV_DRAIN)
    ct.answer(agent, ct.EV_PAUSE_TAG, ct.W, nbytes=4096)
    try:
        out, err = cl.communicate(timeout=BOUND + 30)
    except subprocess.TimeoutExpired:
        cl.kill()
        out, err = cl.communicate()
    lines += out.splitlines()
    ev = [ln for ln in lines if ln.startswith("event id=%d " % dom)]
    t.check("the client sees the release's notifications, the last one "
            "entering released with the result",
            cl.returncode == 0 and ev and "->released " in ev[-1] and
            "result kind=release error=0 reason=none done=0x1" in ev[-1],
            "\n".join(lines) + "\n" + err)
    os.close(agent)
    os.close(engine)
    os.close(dev)
    print("1..%d" % t.n)
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
