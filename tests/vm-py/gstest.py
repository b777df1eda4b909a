# SPDX-License-Identifier: GPL-2.0
"""Helpers of the Python tests: kselftest-style TAP, and the engine / agent /
trainer helper processes of gsproc.py driven line by line.

Imported by tests/vm-py/test_*.py (and tests/host/test_python.py); puts
user/python on sys.path so the package is used from the tree.
"""

import os
import select
import subprocess
import sys
import time
import traceback

sys.dont_write_bytecode = True	# the guest's root is read-only
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "user", "python"))

DEVICE = "/dev/gpusleep"
# Guards against a hang only (a helper that died, a lost event): never a
# measure of speed. Generous for qemu TCG.
GUARD_S = 120


class Skip(Exception):
    pass


class Tap:
    """TAP version 13 with a plan; run(name, fn) prints ok/not ok/SKIP."""

    def __init__(self, names):
        self.n = 0
        self.failed = 0
        self.plan = len(names)
        print("TAP version 13")
        print(f"1..{self.plan}", flush=True)

    def _line(self, s):
        print(s, flush=True)

    def run(self, name, fn, *args):
        self.n += 1
        try:
            fn(*args)
        except Skip as e:
            self._line(f"ok {self.n} {name} # SKIP {e}")
        except BaseException as e:	# noqa: a failed test, whatever it raised
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            self.failed += 1
            for ln in traceback.format_exc().splitlines():
                self._line(f"# {ln}")
            self._line(f"not ok {self.n} {name}")
        else:
            self._line(f"ok {self.n} {name}")

    def skip_rest(self, names, reason):
        for name in names[self.n:]:
            self.n += 1
            self._line(f"ok {self.n} {name} # SKIP {reason}")

    def done(self):
        print(f"# {self.n - self.failed} passed, {self.failed} failed",
              flush=True)
        sys.exit(1 if self.failed else 0)


def need_device(tap, names):
    """SKIP every test (exit 0) when the module is not loaded."""
    if not os.path.exists(DEVICE):
        tap.skip_rest(names, f"no {DEVICE} (module not loaded)")
        tap.done()


class Proc:
    """A gsproc.py helper: lines in on stdin, lines out on stdout."""

    def __init__(self, *args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        e["PYTHONDONTWRITEBYTECODE"] = "1"
        self.p = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "gsproc.py"), *map(str, args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            bufsize=1, env=e)
        self.buf = b""
        self.lines = []
        self.pos = 0		# lines before pos were consumed by expect()

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def _read(self, guard=GUARD_S):
        """Wait for output (at most guard s); split it into lines."""
        fd = self.p.stdout.fileno()
        r, _, _ = select.select([fd], [], [], guard)
        if not r:
            if guard:
                raise AssertionError(f"helper {self.p.args[2:]}: no line in "
                                     f"{guard}s; saw {self.lines[-5:]!r}")
            return False
        data = os.read(fd, 65536)
        if not data:
            raise AssertionError(f"helper {self.p.args[2:]} exited "
                                 f"({self.p.wait()}); saw {self.lines[-5:]!r}")
        self.buf += data
        *done, self.buf = self.buf.split(b"\n")
        self.lines.extend(x.decode() for x in done)
        return True

    def expect(self, prefix):
        """The next line starting with prefix (skipping others); its words
        after the prefix."""
        while True:
            while self.pos < len(self.lines):
                ln = self.lines[self.pos]
                self.pos += 1
                if ln.startswith(prefix):
                    return ln[len(prefix):].split()
            self._read()

    def seen(self, prefix):
        """Lines starting with prefix received so far (read what is
        already queued first)."""
        try:
            while self._read(0):
                pass
        except AssertionError:
            pass
        return [ln for ln in self.lines if ln.startswith(prefix)]

    def ask(self, cmd, answer):
        self.send(cmd)
        return self.expect(answer)

    def close(self):
        if self.p.poll() is None:
            try:
                self.send("quit")
            except (BrokenPipeError, OSError):
                pass
            try:
                self.p.wait(GUARD_S)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def until(what, fn):
    """Poll fn() until true (a guard against a hang only, not a timing)."""
    end = time.monotonic() + GUARD_S
    while not fn():
        check(time.monotonic() < end, f"never: {what}")
        time.sleep(0.02)


def raises(cls, fn, *args, **kw):
    """fn(*args, **kw) must raise exactly-or-a-subclass-of cls; returns it."""
    try:
        fn(*args, **kw)
    except cls as e:
        return e
    except BaseException as e:
        raise AssertionError(f"expected {cls.__name__}, got "
                             f"{type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {cls.__name__}, nothing raised")


def check_layouts():
    """Every ctypes struct of gpusleep._lib against the C compiler's layout
    (build/python/uapi_layout, built by user/python/python.mk)."""
    import ctypes
    from gpusleep import _lib
    exe = os.path.join(REPO, "build", "python", "uapi_layout")
    check(os.access(exe, os.X_OK), f"{exe} not built (make)")
    seen = set()
    for ln in subprocess.run([exe], check=True, capture_output=True,
                             text=True).stdout.splitlines():
        st, field, off, size = ln.split()
        cls = _lib.STRUCTS[st]
        seen.add(st)
        if field == "-":
            check(ctypes.sizeof(cls) == int(size),
                  f"sizeof {st}: ctypes {ctypes.sizeof(cls)}, C {size}")
        else:
            d = getattr(cls, field)
            check((d.offset, d.size) == (int(off), int(size)),
                  f"{st}.{field}: ctypes {d.offset}+{d.size}, C {off}+{size}")
    check(seen == set(_lib.STRUCTS), f"structs not checked: "
          f"{set(_lib.STRUCTS) - seen}")
