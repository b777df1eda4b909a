#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The trainer's side: release every tag of domain NAME, "train", bring
the weights back, then the rest; prints each operation's result.

    python3 trainer.py llm0
"""

import sys

import gpusleep


def main(name):
    r = gpusleep.release(name, timeout=60)
    print("released", ",".join(r.tags), sum(r.bytes.values()), "bytes",
          flush=True)
    # ... train here: the engine's memory is free ...
    r = gpusleep.resume(name, ["weights"], timeout=60)
    print("resumed", ",".join(r.tags), flush=True)
    # ... push new weights here, into the same addresses ...
    r = gpusleep.resume(name, timeout=60)
    print("resumed", ",".join(r.tags), flush=True)
    print("sleeping" if gpusleep.is_sleeping(name) else "awake", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "llm0"))
