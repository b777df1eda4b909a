#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Grants from Python: the engine makes an fd of a role (Engine.grant) for a
process that may not attach by id, which takes it as a Controller
(Controller.from_fd) after it crossed a UNIX socket. SKIPs without
/dev/gpusleep."""

import os
import socket

from gstest import Tap, check, need_device, raises
import gpusleep
from gpusleep import engine as gsengine

NAME = f"pygrant{os.getpid()}"
TESTS = ["a granted controller fd crosses a UNIX socket and controls",
         "a granted agent fd takes the agent slot",
         "a bad role is a ValueError"]
S = {}


def controller_over_socket():
    eng = S["eng"]
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = eng.grant("controller")
    socket.send_fds(a, [b"g"], [fd])
    os.close(fd)
    _, fds, _, _ = socket.recv_fds(b, 1, 1)
    a.close()
    b.close()
    with gpusleep.Controller.from_fd(fds[0]) as c:
        check(c.domain_id == eng.id, f"domain {c.domain_id}")
        check(c.state().state == "awake", "state")
        raises(gpusleep.NotEnabled, c.release)	# no agent yet


def agent_slot():
    eng = S["eng"]
    fd = eng.grant("agent")
    try:
        with gpusleep.Controller(eng.id) as c:
            check(c.state().agent_attached, "the granted fd is the agent")
        e = raises(OSError, eng.grant, "agent")
        check(e.errno == 16, f"EBUSY, got {e.errno}")
    finally:
        os.close(fd)


def bad_role():
    raises(ValueError, S["eng"].grant, "engine")


def main():
    tap = Tap(TESTS)
    need_device(tap, TESTS)
    S["eng"] = gsengine.Engine(NAME)
    try:
        for name, fn in zip(TESTS, [controller_over_socket, agent_slot,
                                    bad_role]):
            tap.run(name, fn)
    finally:
        S["eng"].close()
    tap.done()


if __name__ == "__main__":
    main()
