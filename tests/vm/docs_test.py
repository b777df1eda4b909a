#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The docs' sessions that need the module, run again in the VM: every
block marked <!-- session: vm --> in README.md and docs/*.md. Its
"$ gpusleepctl ..." lines are run, in order, against a domain "llm1"
(weights and kv_cache) whose engine and agent this script plays,
answering every step at once (the weights 14 GiB); monitors are started
first, before the other commands, and stopped once they printed as many
lines as the doc shows. What each printed (stdout, then stderr, then
"[exit N]" when not 0) must be the doc's lines modulo numbers, durations
and runs of blanks. Prints TAP.

--update writes each doc with the sessions as printed into
$GPUSLEEP_OUT/docs/ (the repository is read-only in the VM); copy them
back by hand (tests/vm/docs_test.py names them)."""

import os
import re
import select
import shlex
import struct
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ctl_test as ct  # noqa: E402  (the ioctl helpers, the Tap class)
from mankeys import doc_files  # noqa: E402  (ctl_test put tests/host on the path)

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SESSION = "<!-- session: vm -->"
WEIGHTS_BYTES = 14 << 30
DUR = re.compile(r"\d+(\.\d+)? ?(us|ms|s)\b")


def norm(line):
    """A line modulo numbers, durations and runs of blanks."""
    line = DUR.sub("<t>", line)
    line = re.sub(r"\d+", "N", line)
    return re.sub(r"\s+", " ", line).strip()


def blocks(text):
    """[(first line index, last line index + 1, [(command, [lines])])] of
    every vm session block of text (line indexes of its body)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        if lines[i].strip() != SESSION:
            i += 1
            continue
        i += 2				# the marker, the ```
        start, cmds = i, []
        while not lines[i].startswith("```"):
            if lines[i].startswith("$ gpusleepctl "):
                cmds.append((lines[i][2:], []))
            elif cmds:
                cmds[-1][1].append(lines[i])
            i += 1
        out.append((start, i, cmds))
    return out


class Responder(threading.Thread):
    """The engine and the agent of llm1: every step answered at once, the
    weights' pause and remap with WEIGHTS_BYTES."""

    def __init__(self, fds):
        super().__init__(daemon=True)
        self.fds = fds
        self.stop = False

    def run(self):
        while not self.stop:
            r, _, _ = select.select(self.fds, [], [], 0.1)
            for fd in r:
                try:
                    rec = os.read(fd, 40)
                except OSError:
                    return
                if len(rec) < 40:
                    return
                _, typ, op, tags, _, step, _, _ = struct.unpack(ct.EV_FMT,
                                                                rec)
                if typ not in (ct.EV_DRAIN, ct.EV_RESET, ct.EV_REPAIR,
                               ct.EV_PAUSE_TAG, ct.EV_RESUME_TAG):
                    continue
                nbytes = WEIGHTS_BYTES if (tags == ct.W and typ in (
                    ct.EV_PAUSE_TAG, ct.EV_RESUME_TAG)) else 0
                struct_ = struct.pack("<QIIiIQQQQII", op, step, typ, 0, 0,
                                      nbytes, 0, 0, 0, 0, 0)
                ct.fcntl.ioctl(fd, ct.IOC_COMPLETE, bytearray(struct_))


def output(p_out, p_err, rc):
    lines = p_out.rstrip("\n").split("\n") if p_out.strip() else []
    lines += p_err.rstrip("\n").split("\n") if p_err.strip() else []
    if rc:
        lines.append("[exit %d]" % rc)
    return lines


def main():
    update = "--update" in sys.argv
    print("TAP version 13")
    if not os.path.exists(ct.DEV):
        print("1..0 # SKIP %s missing (module not loaded)" % ct.DEV)
        return 0
    if not os.access(ct.CTL, os.X_OK):
        print("1..0 # SKIP %s not built" % ct.CTL)
        return 0
    docs = [(f, open(f).read()) for f in doc_files()]
    docs = [(f, text, blocks(text)) for f, text in docs if SESSION in text]
    t = ct.Tap()
    dev = os.open(ct.DEV, os.O_RDWR | os.O_CLOEXEC)
    # llm1 is the second domain of the docs' node (the fixture's too)
    llm0, _ = ct.create(dev, "llm0")
    engine, dom = ct.create(dev, "llm1")
    agent = ct.attach(dev, dom, ct.ROLE_AGENT)
    resp = Responder([engine, agent])
    resp.start()
    env = dict(os.environ, PATH=os.path.dirname(ct.CTL) + ":" +
               os.environ.get("PATH", ""))

    # every (doc, block, command index): monitors first, in the background
    runs = {}
    mons = []
    for f, _, bl in docs:
        for b, (_, _, cmds) in enumerate(bl):
            for c, (cmd, want) in enumerate(cmds):
                if "monitor" not in shlex.split(cmd):
                    continue
                p = subprocess.Popen(shlex.split(cmd), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env=env)
                rd = ct.LineReader(p.stdout)
                snap = rd.readline()	# the snapshot: joined
                mons.append(((f, b, c), p, rd, [snap.rstrip("\n")], want))
    for f, _, bl in docs:
        for b, (_, _, cmds) in enumerate(bl):
            for c, (cmd, want) in enumerate(cmds):
                if "monitor" in shlex.split(cmd):
                    continue
                r = subprocess.run(shlex.split(cmd), capture_output=True,
                                   text=True, env=env, timeout=ct.BOUND * 3)
                runs[(f, b, c)] = output(r.stdout, r.stderr, r.returncode)
    for key, p, rd, got, want in mons:
        while len(got) < len(want):
            ln = rd.readline()
            if not ln:
                break
            got.append(ln.rstrip("\n"))
        p.kill()
        _, err = p.communicate()
        runs[key] = got + (err.rstrip("\n").split("\n") if err.strip()
                           else [])
    resp.stop = True
    resp.join()

    for f, text, bl in docs:
        rel = os.path.relpath(f, REPO)
        for b, (_, _, cmds) in enumerate(bl):
            for c, (cmd, want) in enumerate(cmds):
                got = runs[(f, b, c)]
                t.check("%s: $ %s" % (rel, cmd),
                        [norm(x) for x in got] == [norm(x) for x in want],
                        "printed:\n%s\ndocumented:\n%s" %
                        ("\n".join(got), "\n".join(want)))
        lines = text.split("\n")
        for b, (start, end, cmds) in reversed(list(enumerate(bl))):
            lines[start:end] = sum((["$ " + cmd] + runs[(f, b, c)]
                                    for c, (cmd, _) in enumerate(cmds)), [])
        if update:
            dst = os.path.join(os.environ.get("GPUSLEEP_OUT", "/tmp"),
                               "docs", rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "w") as fh:
                fh.write("\n".join(lines))
            print("# updated: %s" % dst)
    os.close(agent)
    os.close(engine)
    os.close(llm0)
    os.close(dev)
    print("1..%d" % t.n)
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
