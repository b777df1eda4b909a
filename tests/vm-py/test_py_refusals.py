#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Every refusal and failure of the module raised from Python as its own
exception, with reason code, reason name, errno, message and tags. The
engine is a helper process that holds its drains until told; the agent
another (host backend). SKIPs without /dev/gpusleep."""

import errno
import os
import pickle
import signal
import threading

from gstest import Tap, Proc, check, need_device, raises
import gpusleep
from gpusleep import _lib, agent as gsagent, engine as gsengine

NAME = f"pyrefuse{os.getpid()}"
TESTS = ["empty tag list is a ValueError",
         "NotEnabled without an agent, whatever the tags",
         "InvalidRequest from the kernel (unknown tag bit or name)",
         "KvReleaseNotAllowed (prefix caching, no reset)",
         "Busy while a release drains",
         "Cancelled: resume before the release drained",
         "AlreadyReleased names the tags",
         "a failed drain with weights released is not go",
         "NotReleased names the tags",
         "DrainTimeout when the engine does not drain",
         "Timeout of a wait; the operation goes on",
         "a wait interrupted by signals keeps its deadline",
         "a wait for the newest, interrupted, returns that operation",
         "EngineFailed: EREMOTEIO, with the engine's errno",
         "exceptions pickle with their fields"]
S = {}


def common(e, cls, err, reason):
    check(type(e) is cls, f"{type(e).__name__} is not {cls.__name__}")
    check(isinstance(e, gpusleep.GpuSleepError) and isinstance(e, OSError),
          "base classes")
    check(e.errno == err, f"errno {e.errno} != {err}")
    check(e.reason == reason, f"reason {e.reason} != {reason}")
    check(e.reason_name == gpusleep.errors.reason_name(reason), e.reason_name)
    check(e.message and str(e), "message")


def local_checks():
    c = S["ctl"]
    raises(ValueError, c.release, [])
    raises(ValueError, c.resume, [])


def not_enabled():
    e = raises(gpusleep.NotEnabled, S["ctl"].release, ["weights"])
    common(e, gpusleep.NotEnabled, errno.ENOTCONN, _lib.R_NOT_ENABLED)
    check(e.op_id == 0, "refused before an operation started")
    # The module's order, as the reference controller's: "not enabled"
    # before "invalid", whatever the tags are.
    e = raises(gpusleep.NotEnabled, S["ctl"].release, ["bogus"])
    common(e, gpusleep.NotEnabled, errno.ENOTCONN, _lib.R_NOT_ENABLED)
    e = raises(gpusleep.NotEnabled, S["ctl"].release, ["weights", "bogus"])
    common(e, gpusleep.NotEnabled, errno.ENOTCONN, _lib.R_NOT_ENABLED)
    # start the agent for what follows
    S["agent"] = ag = Proc("agent", S["id"], 1)
    ag.expect("ready ")


def invalid():
    e = raises(gpusleep.InvalidRequest, S["ctl"].release,
               ["weights", "optimizer"])
    common(e, gpusleep.InvalidRequest, errno.EINVAL, _lib.R_INVALID)
    check("optimizer" in e.message, e.message)
    check(e.tags == ["optimizer"], repr(e.tags))
    check(isinstance(e, ValueError), "InvalidRequest is a ValueError")
    e = raises(gpusleep.InvalidRequest, S["ctl"].resume, ["bogus"])
    common(e, gpusleep.InvalidRequest, errno.EINVAL, _lib.R_INVALID)
    e = raises(gpusleep.InvalidRequest, S["ctl"].release, 1 << 7)
    common(e, gpusleep.InvalidRequest, errno.EINVAL, _lib.R_INVALID)
    e = raises(gpusleep.InvalidRequest, S["ctl"].resume, 1 << 5)
    common(e, gpusleep.InvalidRequest, errno.EINVAL, _lib.R_INVALID)


def kv_not_allowed():
    with gsengine.Engine(NAME + "kv", prefix_caching=True,
                         prefix_cache_reset=False) as eng:
        mm = gsagent.MemoryManager("host")
        with gsagent.Agent(eng.id, mm):
            with gpusleep.Controller(eng.id) as c:
                check(not c.state().kv_release_allowed, "flag")
                e = raises(gpusleep.KvReleaseNotAllowed, c.release)
                common(e, gpusleep.KvReleaseNotAllowed, errno.EOPNOTSUPP,
                       _lib.R_KV_NOT_ALLOWED)
                e = raises(gpusleep.KvReleaseNotAllowed, c.release,
                           ["kv_cache"])
                check(c.state().state == "awake", "nothing changed")
        mm.close()


def busy():
    c, eng = S["ctl"], S["eng"]
    S["op"] = op = c.release(["weights"], wait=False)
    check(op > 0, "op id")
    check(eng.expect("ev drain ") == ["weights", "0"], "drain")
    st = c.state()
    check(st.state == "draining" and st.op_in_flight == op, repr(st))
    e = raises(gpusleep.Busy, c.release, ["kv_cache"])
    common(e, gpusleep.Busy, errno.EBUSY, _lib.R_BUSY)


def cancelled():
    c, eng, op = S["ctl"], S["eng"], S["op"]
    r = c.resume()		# cancels the release still draining
    check(r.ok, repr(r))
    eng.expect("ev cancelled")
    e = raises(gpusleep.Cancelled, c.wait, op)
    common(e, gpusleep.Cancelled, errno.ECANCELED, _lib.R_CANCELLED)
    check(e.op_id == op and e.result is not None, "op id and result")
    check(e.result.tags == ["weights"], repr(e.result))
    check(eng.ask("complete 0", "completed ") == ["False"],
          "the cancelled drain is no longer pending")
    check(c.state().state == "awake", "awake")


def already_released():
    c, eng = S["ctl"], S["eng"]
    op = c.release(["weights"], wait=False)
    eng.expect("ev drain ")
    check(eng.ask("complete 0", "completed ") == ["True"], "answered")
    r = c.wait(op)
    check(r.ok and r.tags == ["weights"], repr(r))
    e = raises(gpusleep.AlreadyReleased, c.release)
    common(e, gpusleep.AlreadyReleased, errno.EALREADY,
           _lib.R_ALREADY_RELEASED)
    check(e.tags == ["weights"], f"tags {e.tags}")


def failed_drain_not_go():
    c, eng = S["ctl"], S["eng"]
    # weights are released (above); a release of kv_cache fails its drain
    gos = len(eng.seen("ev resume_sched"))
    op = c.release(["kv_cache"], wait=False)
    eng.expect("ev drain ")
    eng.ask(f"complete {-errno.EIO}", "completed ")
    raises(gpusleep.EngineFailed, c.wait, op)
    eng.expect("ev cancelled")
    check(eng.ask("paused", "paused ") == ["1"],
          "the engine stays paused after drain_cancelled")
    check(len(eng.seen("ev resume_sched")) == gos,
          "no go with weights released")
    st = c.state()
    check(st.sched_paused and st.released == ["weights"], repr(st))


def not_released():
    c = S["ctl"]
    e = raises(gpusleep.NotReleased, c.resume, ["weights", "kv_cache"])
    common(e, gpusleep.NotReleased, errno.ENOENT, _lib.R_NOT_RELEASED)
    check(e.tags == ["kv_cache"], f"tags {e.tags}")
    r = c.resume()
    check(r.ok and r.tags == ["weights"], repr(r))
    S["eng"].expect("ev resume_sched")


def drain_timeout():
    c, eng = S["ctl"], S["eng"]
    # the engine holds the drain and is never told to answer it
    e = raises(gpusleep.DrainTimeout, c.release, ["weights"], timeout=0.2)
    common(e, gpusleep.DrainTimeout, errno.ETIMEDOUT, _lib.R_DRAIN_TIMEOUT)
    check(isinstance(e, gpusleep.Timeout), "a Timeout")
    eng.expect("ev drain ")
    check(c.state().state == "awake", "nothing released")
    check(eng.ask("complete 0", "completed ") in (["True"], ["False"]),
          "late answer")


def wait_timeout():
    c, eng = S["ctl"], S["eng"]
    op = c.release(["kv_cache"], wait=False)
    eng.expect("ev drain ")
    # the drain is held: nothing can finish the operation meanwhile
    e = raises(gpusleep.Timeout, c.wait, op, timeout=0.05)
    check(e.errno == errno.ETIMEDOUT and e.reason == _lib.R_NONE, str(e))
    check(c.state().op_in_flight == op, "still running")
    eng.ask("complete 0", "completed ")
    r = c.wait(op)
    check(r.ok and r.tags == ["kv_cache"], repr(r))
    eng.expect("ev reset")
    check(c.resume().ok, "resume")


class Ticks:
    """SIGALRM every 20 ms, with a handler that does not raise (as a
    profiler's or a framework's timer would), for at most 150 ticks."""

    def __enter__(self):
        self.n = 0
        self.old = signal.signal(signal.SIGALRM, self._tick)
        signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
        return self

    def _tick(self, sig, frame):
        self.n += 1
        if self.n >= 150:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.old)


def wait_keeps_deadline():
    c, eng = S["ctl"], S["eng"]
    op = c.release(["kv_cache"], wait=False)
    eng.expect("ev drain ")
    # The drain is held. Had each interrupted wait started its timeout
    # again, it would only time out once the ticks stop (150 of them).
    with Ticks() as t:
        e = raises(gpusleep.Timeout, c.wait, op, timeout=0.3)
        n = t.n
    check(n >= 2, f"interrupted {n} times")
    check(n < 150, "timed out only once the signals stopped")
    check(e.errno == errno.ETIMEDOUT, str(e))
    eng.ask("complete 0", "completed ")
    check(c.wait(op).ok, "the release")
    eng.expect("ev reset")
    check(c.resume().ok, "resume")


def wait_newest_interrupted():
    c, eng = S["ctl"], S["eng"]
    op = c.release(["kv_cache"], wait=False)
    eng.expect("ev drain ")
    done = threading.Timer(0.2, eng.ask, ("complete 0", "completed "))
    with Ticks() as t:
        done.start()
        r = c.wait(0, timeout=30)	# 0: the newest, this release
        n = t.n
    done.join()
    check(n >= 2, f"interrupted {n} times")
    check(r.ok and r.op_id == op and r.tags == ["kv_cache"], repr(r))
    eng.expect("ev reset")
    check(c.resume().ok, "resume")


def engine_failed():
    c, eng = S["ctl"], S["eng"]
    op = c.release(wait=False)
    eng.expect("ev drain ")
    eng.ask(f"complete {-errno.EIO}", "completed ")
    e = raises(gpusleep.EngineFailed, c.wait, op)
    common(e, gpusleep.EngineFailed, errno.EREMOTEIO, _lib.R_ENGINE_FAILED)
    check(e.peer_errno == errno.EIO, f"peer errno {e.peer_errno}")
    check(c.state().state == "awake", "nothing released")


def pickles():
    e = gpusleep.AlreadyReleased(_lib.R_ALREADY_RELEASED, op_id=0,
                                 tags=["weights"])
    f = pickle.loads(pickle.dumps(e))
    check(type(f) is gpusleep.AlreadyReleased and f.tags == ["weights"]
          and f.errno == errno.EALREADY and f.reason_name ==
          "ALREADY_RELEASED", repr(f))


def main():
    tap = Tap(TESTS)
    need_device(tap, TESTS)
    S["eng"] = Proc("engine", NAME, "--hold")
    try:
        S["id"] = int(S["eng"].expect("ready ")[0])
        S["ctl"] = gpusleep.Controller(S["id"])
        for name, fn in zip(TESTS, [local_checks, not_enabled, invalid,
                                    kv_not_allowed, busy, cancelled,
                                    already_released, failed_drain_not_go,
                                    not_released,
                                    drain_timeout, wait_timeout,
                                    wait_keeps_deadline,
                                    wait_newest_interrupted,
                                    engine_failed, pickles]):
            tap.run(name, fn)
    finally:
        for k in ("eng", "agent"):
            if k in S:
                S[k].close()
    tap.done()


if __name__ == "__main__":
    main()
