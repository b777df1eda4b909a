# SPDX-License-Identifier: GPL-2.0
"""load_general_plugins(): every entry point of the group
vllm.general_plugins (only those named in VLLM_PLUGINS when it is set),
loaded and called, once per process, as vLLM does in each process it
starts."""

import os
from importlib.metadata import entry_points

_loaded = False


def load_general_plugins():
    global _loaded
    if _loaded:
        return
    _loaded = True
    allowed = os.environ.get("VLLM_PLUGINS")
    names = None if allowed is None else allowed.split(",")
    for ep in entry_points(group="vllm.general_plugins"):
        if names is None or ep.name in names:
            ep.load()()
