#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Benchmark 2(b): the reference architecture's stand-in.

The same weights-only release/resume message flow as bench_roundtrip.c
(controller -> engine -> agent -> controller; controller -> agent ->
controller, plus a one-way resume-scheduling message to the engine), between
three python3 processes (stdlib only) that send pickled request objects over
AF_UNIX SOCK_SEQPACKET socketpairs, as the seed's ZMQ send_pyobj /
recv_pyobj channel pickles its io_struct dataclasses.

Usage: pickle_rt.py CYCLES. Prints one line: median cycle, release and
resume times in ns.
"""
import dataclasses
import os
import pickle
import socket
import statistics
import sys
import time


@dataclasses.dataclass
class ReleaseReq:
    tags: list | None = None


@dataclasses.dataclass
class PauseTagReq:
    tag: str = "weights"


@dataclasses.dataclass
class ResumeReq:
    tags: list | None = None


@dataclasses.dataclass
class ResumeSchedReq:
    pass


@dataclasses.dataclass
class Output:
    success: bool = True
    message: str = ""


@dataclasses.dataclass
class Quit:
    pass


def send_pyobj(sock, obj):
    sock.send(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))


def recv_pyobj(sock):
    data = sock.recv(65536)
    if not data:
        return Quit()
    return pickle.loads(data)


def engine(ce, ea):
    while True:
        req = recv_pyobj(ce)
        if isinstance(req, Quit):
            send_pyobj(ea, Quit())
            return
        if isinstance(req, ReleaseReq):
            # drained at once; the release goes on to the data plane
            send_pyobj(ea, PauseTagReq(tag=req.tags[0]))


def agent(ea, ac):
    released = set()
    while True:
        req = recv_pyobj(ea)
        if not isinstance(req, PauseTagReq):
            return
        released.add(req.tag)
        send_pyobj(ac, Output(success=True))
        req = recv_pyobj(ac)
        if not isinstance(req, ResumeReq):
            return
        for t in req.tags:
            released.discard(t)
        send_pyobj(ac, Output(success=True))


def main():
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    ce = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ea = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ac = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pids = []
    if (pid := os.fork()) == 0:
        engine(ce[1], ea[0])
        os._exit(0)
    pids.append(pid)
    if (pid := os.fork()) == 0:
        agent(ea[1], ac[1])
        os._exit(0)
    pids.append(pid)

    rel, res, cyc = [], [], []
    for i in range(cycles + 20):
        t0 = time.monotonic_ns()
        send_pyobj(ce[0], ReleaseReq(tags=["weights"]))
        out = recv_pyobj(ac[0])
        assert out.success
        t1 = time.monotonic_ns()
        send_pyobj(ac[0], ResumeReq(tags=["weights"]))
        out = recv_pyobj(ac[0])
        assert out.success
        send_pyobj(ce[0], ResumeSchedReq())
        t2 = time.monotonic_ns()
        if i >= 20:  # warm-up
            rel.append(t1 - t0)
            res.append(t2 - t1)
            cyc.append(t2 - t0)
    send_pyobj(ce[0], Quit())
    for pid in pids:
        os.waitpid(pid, 0)
    print(statistics.median(cyc), statistics.median(rel),
          statistics.median(res))


if __name__ == "__main__":
    main()
