#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A stand-in for an interactive shell running COMMAND as a background job
(`COMMAND &`): this process leads a new session whose controlling terminal
is a new pseudo-terminal, and stays its foreground process group; COMMAND
runs in a process group of its own with that terminal as its stdin and a
pipe as its stdout and stderr.

    job_shell.py COMMAND [ARG...]

Prints COMMAND's first line ("ready ..."), then obeys lines on stdin:
  type TEXT   TEXT and a newline arrive on the terminal, as if typed
              (what the job sees if it reads the terminal); prints "typed"
  kill        SIGTERM (and SIGCONT) to the job, as `kill %1`; waits for it,
              prints its other lines, "never stopped" or "stopped by signal
              N", then "engine exit STATUS"; exits
Used by tests/vm-py/test_py_examples.py."""

import fcntl
import os
import pty
import signal
import sys
import termios
import threading


def main(cmd):
    os.setsid()
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)	# ours; we are foreground
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            os.dup2(slave, 0)
            os.dup2(w, 1)
            os.dup2(w, 2)
            os.closerange(3, 256)
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    os.setpgid(pid, pid)		# a background job from here on
    os.close(w)
    stops, status = [], []
    out = os.fdopen(r, "r")

    def waiter():
        while True:
            _, st = os.waitpid(pid, os.WUNTRACED)
            if os.WIFSTOPPED(st):
                stops.append(os.WSTOPSIG(st))
                continue
            status.append(os.waitstatus_to_exitcode(st))
            return

    def echo():			# what the terminal echoes: not needed
        try:
            while os.read(master, 4096):
                pass
        except OSError:
            pass

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    threading.Thread(target=echo, daemon=True).start()
    print(out.readline(), end="", flush=True)
    for line in sys.stdin:
        word, _, arg = line.rstrip("\n").partition(" ")
        if word == "type":
            os.write(master, (arg + "\n").encode())
            print("typed", flush=True)
        elif word == "kill":
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)	# a stopped job, as kill %1
            rest = out.read()
            t.join()
            print(rest, end="")
            print(f"stopped by signal {stops[0]}" if stops else
                  "never stopped")
            print(f"engine exit {status[0]}", flush=True)
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
