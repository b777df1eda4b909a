#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The kernel's own YNL client (tools/net/ynl of a kernel source tree that
make check unpacked under build/, or $GPUSLEEP_YNL_SRC) against the module:
the spec validates against the kernel's genetlink-legacy schema; every
operation (get do and dump, release, resume) and the "events" multicast
group work through it; and what it decodes covers every state, every
state flag, both tags, both operation kinds, the reasons an operation
can get here, and the step notifications (every step type, both phases).
A refused release or resume is an error ack whose extended ack names the
reason (issue 35). This script plays engine and agent by hand. Prints
TAP; SKIPs when no kernel source with YNL is there.

YNL's library (the lib/ beside cli.py, what the CLI is a front end of) is
loaded once, here: every request and the notifications go through it in
this process, and the CLI itself is started once (dump get, its JSON
output). Each Python start parses the spec and its schema again, and
under TCG on the debug kernel that costs tens of seconds."""

import errno
import fcntl
import glob
import re
import json
import os
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import ctl_test as ct  # noqa: E402  (the ioctl helpers, engine and agent)

SPEC = os.path.join(REPO, "Documentation/netlink/specs/gpusleep.yaml")
# tests/run-in-vm.sh --scale auto: how much slower than a quiet VM this is
SCALE = max(1.0, int(os.environ.get("GPUSLEEP_TIME_SCALE", "100")) / 100)
IOC_RELEASE = ct._ioc(3, 0x10, 48)             # struct gpusleep_op
IOC_RESUME = ct._ioc(3, 0x11, 48)
IOC_GET_STATE = ct._ioc(2, 0x13, 448)          # struct gpusleep_state
OPF_NONBLOCK = 1 << 1
BOUND = int(60 * SCALE)    # seconds: "never happens", not a timing check


def ynl_src():
    """(cli.py, genetlink-legacy.yaml) of the newest source tree found."""
    roots = [os.environ["GPUSLEEP_YNL_SRC"]] if \
        os.environ.get("GPUSLEEP_YNL_SRC") else \
        sorted(glob.glob(os.path.join(REPO, "build/kernels/*/src")) +
               glob.glob(os.path.join(REPO, "build/debug-kernel/src-*")),
               reverse=True)
    for r in roots:
        for cli in ("tools/net/ynl/pyynl/cli.py", "tools/net/ynl/cli.py"):
            c = os.path.join(r, cli)
            s = os.path.join(r, "Documentation/netlink/genetlink-legacy.yaml")
            if os.path.isfile(c) and os.path.isfile(s):
                return c, s
    return None, None


CLI, SCHEMA = ynl_src()


def ynl(*args, timeout=BOUND):
    """One run of the CLI (the spec already validated: no schema)."""
    r = subprocess.run([sys.executable, CLI, "--spec", SPEC, "--schema", "",
                        "--output-json"] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    out = [json.loads(ln) for ln in r.stdout.splitlines()
           if ln.startswith(("{", "["))]
    return r, out


def plain(msg):
    """A decoded message as the CLI prints it with --output-json: sets as
    sorted lists, bytes as hex."""
    def enc(o):
        if isinstance(o, bytes):
            return o.hex()
        if isinstance(o, set):
            return sorted(o)
        raise TypeError(repr(o))
    return json.loads(json.dumps(msg, default=enc))


class Ynl:
    """YNL's library, loaded from beside the CLI: one family for requests,
    validated against the schema when it is made, and one subscribed to
    the "events" group, whose notifications are collected as they come."""

    def __init__(self):
        sys.path.insert(0, os.path.dirname(CLI))
        from lib import YnlFamily, NlError  # noqa: E402  (the kernel's)
        self.NlError = NlError
        self.error = None
        try:
            self.req = YnlFamily(SPEC, SCHEMA)
        except Exception as e:          # whatever the validator raises
            self.error = "%s: %s" % (type(e).__name__, e)
            self.req = YnlFamily(SPEC, "")
        self.ntf = YnlFamily(SPEC, "")
        self.ntf.ntf_subscribe("events")
        self.ntfs = []

    def collect(self):
        """Move what arrived on the events socket into self.ntfs (often
        enough that its receive buffer never overflows)."""
        self.ntf.check_ntf()
        q = self.ntf.async_msg_queue
        if isinstance(q, list):         # up to 6.12
            self.ntfs += [plain(m) for m in q]
            q.clear()
            return
        while not q.empty():            # a queue.Queue from 6.13
            self.ntfs.append(plain(q.get_nowait()))

    def do(self, op, attrs):
        """The reply, or for an error ack {"error": -errno, "refused":
        the extended ack's message}."""
        self.collect()
        try:
            rep = plain(self.req.do(op, attrs))
        except self.NlError as e:
            ext = getattr(e.nl_msg, "extack", None) or {}
            rep = {"error": -e.error, "refused": ext.get("msg", "")}
        self.collect()
        return rep


Y = None


def do(op, attrs):
    return Y.do(op, attrs)


def _ioc(d, nr, size):
    return (d << 30) | (size << 16) | (0xBC << 8) | nr


def group_release(dev, engine, other, name):
    """A group (docs/groups.md) of the domains of engine and other, with a
    release started on it and engine's drain answered (other's not): the
    rank of engine is held. The group fd."""
    buf = bytearray(struct.pack("<32sII2Q", name.encode(), 0, 0, 0, 0))
    grp = fcntl.ioctl(dev, _ioc(3, 0x03, 56), buf, True)
    for fd in (engine, other):
        fcntl.ioctl(grp, _ioc(3, 0x30, 32),
                    bytearray(struct.pack("<iIII2Q", fd, 0, 0, 0, 0, 0)),
                    True)
    fcntl.ioctl(grp, _ioc(3, 0x31, 56),
                bytearray(struct.pack("<IIIIQIIII2Q", 1, 2, 0, 0, 0, 0, 0,
                                      0, 0, 0, 0)), True)	# weights, NB
    ct.answer(engine, ct.EV_DRAIN)
    return grp


def main():
    t = ct.Tap()
    print("TAP version 13", flush=True)
    if not os.path.exists(ct.DEV):
        print("1..0 # SKIP no /dev/gpusleep")
        return 0
    if not CLI:
        print("1..0 # SKIP no kernel source with tools/net/ynl under build/"
              " (make check unpacks one) and no $GPUSLEEP_YNL_SRC")
        return 0
    seen = {"state": set(), "flags": set(), "tags": set(), "kind": set(),
            "reason": set(), "tag-kind": set(), "refused": set()}

    def note(msg):
        seen["state"].add(msg.get("state"))
        seen["state"].add(msg.get("from-state"))
        seen["flags"] |= set(msg.get("flags", []))
        for tag in msg.get("tag", []) or []:
            seen["tags"].add(tag.get("name"))
            seen["tag-kind"].add(tag.get("kind"))
        if "reason" in msg:
            seen["reason"].add(msg["reason"])
        m = re.match(r"refused \((\w+)\)", msg.get("refused", ""))
        if m:           # a refusal's reason, in its error ack's message
            seen["refused"].add(m.group(1).replace("_", "-"))
        if "last-reason" in msg:
            seen["reason"].add(msg["last-reason"])
        res = msg.get("result")
        if res:
            seen["kind"].add(res.get("kind"))
            seen["reason"].add(res.get("reason"))

    global Y
    Y = Ynl()
    t.check("the spec validates against the kernel's genetlink-legacy "
            "schema", Y.error is None, Y.error)

    dev = os.open(ct.DEV, os.O_RDWR)
    engine, dom = ct.create(dev, "ynl-%d" % os.getpid(),
                            caps=3)   # prefix caching with a reset

    r, out = ynl("--dump", "get")
    mine = [m for m in (out[0] if out else []) if m.get("id") == dom]
    t.check("dump get lists the domain, decoded", len(mine) == 1 and
            mine[0]["state"] == "awake" and
            "kv-release-allowed" in mine[0]["flags"], r.stdout + r.stderr)
    for m in mine:
        note(m)

    g = do("get", {"id": dom})
    note(g)
    t.check("do get: name, counters nest", g.get("name", "").startswith(
        "ynl-") and "releases" in g.get("counters", {}), g)

    # not enabled (no agent), then an agent
    rep = do("release", {"id": dom, "tags": 1})
    note(rep)
    t.check("release without an agent: an error ack, ENOTCONN, "
            "the reason named in the extended ack",
            rep.get("error") == -errno.ENOTCONN and
            "(not_enabled)" in rep.get("refused", ""), rep)
    agent = ct.attach(dev, dom, ct.ROLE_AGENT)

    # release of both, driven by hand, with abort-inflight
    rep = do("release", {"id": dom, "op-flags": ["abort-inflight"],
                         "timeout-ms": 30000})
    note(rep)
    t.check("release: started, op id in the reply",
            rep.get("reason") == "none" and rep.get("op-id", 0) > 0, rep)
    note(do("get", {"id": dom}))                # draining, drain-pending
    ct.answer(engine, ct.EV_DRAIN)
    ct.answer(engine, ct.EV_RESET)
    ct.answer(agent, ct.EV_PAUSE_TAG, ct.W, nbytes=4096)
    note(do("get", {"id": dom}))                # releasing, kv unconfirmed
    ct.answer(agent, ct.EV_PAUSE_TAG, ct.KV, nbytes=4096,
              resident=5 << 20, source=ct.RESIDENT_PROCESS)
    g = do("get", {"id": dom})
    t.check("what stays resident decoded, with its source",
            g.get("resident-bytes") == 5 << 20 and
            g.get("resident-source") == "process", g)
    rep = do("release", {"id": dom, "tags": 1})
    note(rep)
    t.check("release of a released tag: EALREADY, already_released named",
            rep.get("error") == -errno.EALREADY and
            "(already_released)" in rep.get("refused", ""), rep)
    rep = do("resume", {"id": dom, "op-flags": ["abort-inflight"]})
    note(rep)
    t.check("resume with abort-inflight: EINVAL (the spec's mask lets it "
            "through), the flag named",
            rep.get("error") == -errno.EINVAL and
            "flag" in rep.get("refused", ""), rep)

    # resume kv only: the repair is pending while the engine holds it
    rep = do("resume", {"id": dom, "tags": 2})
    note(rep)
    ct.answer(agent, ct.EV_RESUME_TAG, ct.KV, nbytes=4096)
    note(do("get", {"id": dom}))                # resuming, kv-repair-pending
    ct.answer(engine, ct.EV_REPAIR)
    rep = do("resume", {"id": dom, "tags": 2})
    note(rep)
    # a resume of weights whose agent step times out: agent-unconfirmed.
    # The step is read at once (a step never read is taken back when it
    # times out), with a deadline long enough for a slow kernel to get
    # there first; then the test waits for the timeout, bounded.
    rep = do("resume", {"id": dom, "timeout-ms": 10000})
    note(rep)
    ct.next_event(agent)                        # read, never answered
    for _ in range(BOUND):
        g = do("get", {"id": dom})
        if not g.get("op-in-flight"):
            break
        time.sleep(1)
    note(g)
    # a release cancelled by a resume, then the rest back
    os.close(agent)
    agent = ct.attach(dev, dom, ct.ROLE_AGENT)
    rep = do("resume", {"id": dom})
    note(rep)
    ct.answer(agent, ct.EV_RESUME_TAG, ct.W, nbytes=4096)
    rep = do("release", {"id": dom, "tags": 1})
    note(rep)
    ct.next_event(engine)                       # the drain, held
    rep = do("resume", {"id": dom})             # cancels it
    note(rep)
    # a rank of a group, drained and held for the group: group-held, and
    # the group's name on the domain
    engine2, dom2 = ct.create(dev, "ynl2-%d" % os.getpid(), caps=3)
    agent2 = ct.attach(dev, dom2, ct.ROLE_AGENT)
    grp = group_release(dev, engine, engine2, "ynlg-%d" % os.getpid())
    g = do("get", {"id": dom})
    note(g)
    t.check("a group's rank: group named, group-held while the group waits",
            g.get("group") == "ynlg-%d" % os.getpid() and
            "group-held" in g.get("flags", []), g)
    os.close(grp)                               # cancels the held rank
    for fd in (agent2, engine2):
        os.close(fd)
    # the group's end cancels the rank in the group's work: wait for it,
    # or the release below is refused (busy) and the engine's death
    # below ends no operation (engine-gone unseen)
    for _ in range(BOUND * 10):
        st = bytearray(448)
        fcntl.ioctl(engine, IOC_GET_STATE, st)
        if not struct.unpack_from("<Q", st, 24)[0]:     # op_in_flight
            break
        Y.collect()
        time.sleep(0.1)
    rep = do("release", {"id": dom, "tags": 1})
    note(rep)
    t.check("a release to end by its engine's death: started",
            not rep.get("error") and rep.get("op-id"), rep)
    note(do("get", {"id": dom}))
    os.close(engine)                            # dead, mid-release
    os.close(agent)

    # the other reasons an operation gets, on a second domain: prefix
    # caching without a reset
    engine, dom2 = ct.create(dev, "ynl2-%d" % os.getpid(), caps=1)
    agent = ct.attach(dev, dom2, ct.ROLE_AGENT)
    others = [dom2]

    # Operations are started and awaited through the ioctls (a YNL run is
    # a Python start: seconds under TCG, more on the debug kernel); what
    # YNL must decode comes back in the notifications' results and, for
    # the refusals, in its own replies.
    def start(cmd, tags=0, timeout_ms=0):
        fcntl.ioctl(engine, cmd, bytearray(struct.pack(
            "<IIIIQII2Q", tags, OPF_NONBLOCK, timeout_ms, 0, 0, 0, 0, 0,
            0)))

    def settle():
        for _ in range(BOUND * 10):
            st = bytearray(448)
            fcntl.ioctl(engine, IOC_GET_STATE, st)
            if not struct.unpack_from("<Q", st, 24)[0]:   # op_in_flight
                return
            Y.collect()
            time.sleep(0.1)
        raise RuntimeError("an operation never ended")

    note(do("release", {"id": dom2}))           # kv-not-allowed
    note(do("resume", {"id": dom2, "tags": 1}))  # not-released
    start(IOC_RELEASE, 1)
    ct.next_event(engine)                       # the drain, held
    note(do("release", {"id": dom2, "tags": 1}))  # busy
    start(IOC_RESUME)                           # cancels it
    settle()
    start(IOC_RELEASE, 1, 300)
    ct.next_event(engine)                       # the drain, never answered
    settle()                                    # drain-timeout
    start(IOC_RELEASE, 1)
    ct.answer(engine, ct.EV_DRAIN, status=-5)   # engine-failed
    settle()
    start(IOC_RELEASE, 1)
    ct.answer(engine, ct.EV_DRAIN)
    ct.answer(agent, ct.EV_PAUSE_TAG, ct.W, status=-5)   # agent-failed
    settle()
    start(IOC_RELEASE, 1)
    ct.answer(engine, ct.EV_DRAIN)
    ct.next_event(agent)                        # the pause, read
    os.close(agent)                             # agent-gone
    settle()
    os.close(engine)
    # and a repair never answered: engine-timeout (no prefix caching)
    engine, dom2 = ct.create(dev, "ynl3-%d" % os.getpid(), caps=0)
    agent = ct.attach(dev, dom2, ct.ROLE_AGENT)
    others.append(dom2)
    start(IOC_RELEASE, 2)
    ct.answer(engine, ct.EV_DRAIN)
    ct.answer(engine, ct.EV_RESET)
    ct.answer(agent, ct.EV_PAUSE_TAG, ct.KV, nbytes=4096)
    settle()
    start(IOC_RESUME, 0, 300)
    ct.answer(agent, ct.EV_RESUME_TAG, ct.KV, nbytes=4096)
    ct.next_event(engine)                       # the repair, never answered
    settle()                                    # engine-timeout
    os.close(engine)
    os.close(agent)
    os.close(dev)

    # the last notifications: sent before the replies and the ioctls
    # return, but a slow kernel gets a moment all the same
    for _ in range(30):
        time.sleep(0.1)
        Y.collect()
    ntfs = Y.ntfs
    mine = [n["msg"] for n in ntfs if n.get("name") == "state-ntf" and
            n.get("msg", {}).get("id") == dom]
    for m in mine:
        note(m)
    for n in ntfs:
        if n.get("name") == "state-ntf" and \
                n.get("msg", {}).get("id") in others:
            note(n["msg"])
    t.check("the events group: notifications of this domain decoded",
            len(mine) >= 8, f"{len(mine)} notifications")

    states = {"awake", "draining", "releasing", "released", "resuming",
              "dead"}
    t.check("every state decoded", states <= seen["state"],
            f"missing {states - seen['state']}")
    flags = {"drain-pending", "op-in-flight", "agent-attached",
             "kv-release-allowed", "sched-paused", "dead",
             "kv-repair-pending", "agent-unconfirmed", "group-held"}
    t.check("every state flag decoded", flags <= seen["flags"],
            f"missing {flags - seen['flags']}")
    t.check("the declared tags decoded, by name and kind",
            {"weights", "kv_cache"} <= seen["tags"] and
            {"memory", "kv-cache"} <= seen["tag-kind"],
            (seen["tags"], seen["tag-kind"]))
    t.check("both operation kinds decoded",
            {"release", "resume"} <= seen["kind"], seen["kind"])
    # every reason but no-memory and queue-full, which need the fault
    # build (fault_test covers them through the ioctls): those of
    # operations decoded from the messages, the refusals' named in their
    # error acks
    reasons = {"none", "cancelled", "drain-timeout", "agent-timeout",
               "engine-failed", "agent-failed", "agent-gone", "engine-gone",
               "engine-timeout"}
    t.check("the reasons met here decoded", reasons <= seen["reason"],
            f"missing {reasons - seen['reason']}")
    refusals = {"not-enabled", "invalid", "kv-not-allowed",
                "already-released", "busy", "not-released"}
    t.check("the refusals met here named in their error acks",
            refusals <= seen["refused"],
            f"missing {refusals - seen['refused']}")
    steps = [n["msg"] for n in ntfs if n.get("name") == "step-ntf" and
             n.get("msg", {}).get("id") in [dom] + others]
    types = {m.get("step-type") for m in steps}
    phases = {m.get("step-phase") for m in steps}
    want = {"drain", "reset-caches", "repair-kv", "pause-tag", "resume-tag"}
    t.check("the step notifications decoded: every step type, both phases",
            want <= types and phases == {"start", "end"} and
            all(isinstance(m.get("time-ns"), int) and m.get("op-id")
                for m in steps), (types, phases, steps[:2]))
    print("1..%d" % t.n)
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
