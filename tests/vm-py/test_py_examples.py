#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The Python examples (user/python/examples) run as their docstrings say,
from a shell on a terminal (make vm-shell):

- `python3 engine.py NAME &` then `python3 trainer.py NAME`: the engine,
  a background job of an interactive shell (its own process group, not
  the terminal's foreground one, stdin the terminal), keeps answering
  while the user types the next command on that terminal: it never reads
  the terminal (which would stop it on SIGTTIN, and the trainer would
  then fail with DrainTimeout); the trainer's release and resumes
  complete; SIGTERM (`kill %1`) ends the engine, which says whether the
  weights came through intact.

The "shell" is tests/vm-py/standin/job_shell.py: a session leader owning
a pseudo-terminal, the engine its background job. SKIPs without
/dev/gpusleep."""

import os
import subprocess
import sys

from gstest import Tap, Skip, check, REPO, DEVICE, GUARD_S

EXAMPLES = os.path.join(REPO, "user", "python", "examples")
SHELL = os.path.join(REPO, "tests", "vm-py", "standin", "job_shell.py")
TESTS = ["engine.py as a background job on a terminal: the trainer's "
         "cycle completes while the user types; kill ends it"]


def env():
    e = {k: v for k, v in os.environ.items() if k != "GPUSLEEP_LIB"}
    e.update(GPUSLEEP_BACKEND="host", PYTHONDONTWRITEBYTECODE="1",
             PYTHONPATH=os.path.join(REPO, "user", "python"))
    return e


def background_engine():
    if not os.path.exists(DEVICE):
        raise Skip(f"no {DEVICE} (module not loaded)")
    name = f"pyexbg{os.getpid()}"
    sh = subprocess.Popen(
        [sys.executable, SHELL, sys.executable,
         os.path.join(EXAMPLES, "engine.py"), name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=env(), cwd="/")
    try:
        line = sh.stdout.readline()
        check(line.startswith(f"ready {name} "), f"engine: {line!r}")
        # the user types the next command on the engine's terminal
        sh.stdin.write("type python3 trainer.py\n")
        sh.stdin.flush()
        check(sh.stdout.readline() == "typed\n", "the shell did not type")
        tr = subprocess.run([sys.executable,
                             os.path.join(EXAMPLES, "trainer.py"), name],
                            capture_output=True, text=True, env=env(),
                            timeout=GUARD_S * 2, cwd="/")
        check(tr.returncode == 0, tr.stdout + tr.stderr)
        check(tr.stdout.splitlines()[1:] == [
            "resumed weights", "resumed kv_cache", "awake"], tr.stdout)
        sh.stdin.write("kill\n")
        sh.stdin.flush()
        out, _ = sh.communicate(timeout=GUARD_S)
    finally:
        if sh.poll() is None:
            sh.kill()
            sh.wait()
    lines = out.splitlines()
    check("never stopped" in lines, out)
    check("weights intact" in lines, out)
    check(f"engine exit 0" in lines, out)
    check(sh.returncode == 0, out)


def main():
    tap = Tap(TESTS)
    tap.run(TESTS[0], background_engine)
    tap.done()


if __name__ == "__main__":
    main()
