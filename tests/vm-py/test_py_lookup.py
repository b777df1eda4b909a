#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Finding a domain from Python against the module: a name two live
domains share is refused (AmbiguousDomain, nothing released), an unknown
id is DomainNotFound as an unknown name is, another user reads the state
(from sysfs) but may not release (PermissionDenied saying sudo or a
grant). SKIPs without /dev/gpusleep."""

import ctypes
import os

from gstest import Tap, check, need_device, raises
import gpusleep
from gpusleep import engine as gsengine

NAME = f"pylookup{os.getpid()}"
TESTS = ["a name two domains share: AmbiguousDomain, nothing released",
         "an unknown id: DomainNotFound, as an unknown name",
         "another user: state() and is_sleeping() from sysfs",
         "another user: release() is PermissionDenied, says sudo or grant",
         "another pid namespace: the name is its own domain's there"]
S = {}


def ambiguous():
    e = raises(gpusleep.AmbiguousDomain, gpusleep.release, NAME)
    check(sorted(e.ids) == sorted(x.id for x in S["engs"]), str(e))
    for eng in S["engs"]:
        check(gpusleep.state(eng.id).state == "awake", "nothing released")


def unknown_id():
    e = raises(gpusleep.DomainNotFound, gpusleep.release, 4000000)
    check(isinstance(e, LookupError), repr(e))
    raises(gpusleep.DomainNotFound, gpusleep.state, 4000000)
    raises(gpusleep.DomainNotFound, gpusleep.release, NAME + "-none")


def in_child(fn, prepare):
    """fn() in a child after prepare() (which may fork again: the process
    that returns from it runs fn); its result or its exception's (class
    name, text), through a pipe."""
    import pickle
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            prepare()
            out = ("ok", fn())
        except BaseException as e:	# noqa: B902
            out = ("raised", type(e).__name__, str(e))
        os.write(w, pickle.dumps(out))
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return pickle.loads(data)


def _nobody():
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)


def as_nobody(fn):
    return in_child(fn, _nobody)


def _new_pidns():
    """Into a new pid namespace: unshare(CLONE_NEWPID), then fork; the
    child (pid 1 there) returns, this process waits for it and exits."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x20000000):	# CLONE_NEWPID
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID)")
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        os._exit(0)


def other_pidns():
    """A domain of this name in another pid namespace (another container
    as the same user): from there, the name is its own domain's, whose
    creator it sees; from here, where both creators are seen, ambiguous."""
    def there():
        with gsengine.Engine(NAME) as eng:
            return eng.id, gpusleep.resolve_domain(NAME)
    out = in_child(there, _new_pidns)
    check(out[0] == "ok", repr(out))
    theirs, resolved = out[1]
    check(resolved == theirs, f"resolved {resolved}, its own is {theirs}")
    check(theirs not in [x.id for x in S["engs"]], "a domain of its own")


def other_user_reads():
    did = S["engs"][0].id
    out = as_nobody(lambda: (lambda st: (st.source, st.id, st.state,
                                         st.released))(gpusleep.state(did)))
    check(out == ("ok", ("sysfs", did, "awake", [])), repr(out))
    out = as_nobody(lambda: gpusleep.is_sleeping(did))
    check(out == ("ok", False), repr(out))


def other_user_release():
    did = S["engs"][0].id
    out = as_nobody(lambda: gpusleep.release(did))
    check(out[0] == "raised" and out[1] == "PermissionDenied" and
          "sudo" in out[2] and "grant" in out[2], repr(out))


def main():
    tap = Tap(TESTS)
    need_device(tap, TESTS)
    S["engs"] = [gsengine.Engine(NAME), gsengine.Engine(NAME)]
    try:
        for name, fn in zip(TESTS, [ambiguous, unknown_id, other_user_reads,
                                    other_user_release, other_pidns]):
            tap.run(name, fn)
    finally:
        for eng in S["engs"]:
            eng.close()
    tap.done()


if __name__ == "__main__":
    main()
