# SPDX-License-Identifier: GPL-2.0
"""A stand-in for the parts of vLLM its sleep mode goes through. Models
vllm 0.33.0 (its sources, read, not copied): each module here has the
path of the real one and what it defines is checked against it by
tests/host/test_standins.py. vllm.LLM is loaded on first use, as vLLM
does (__getattr__). Used by tests/vm-py/test_py_dist.py and
test_py_guides.py."""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "LLM":
        from vllm.entrypoints.llm import LLM
        return LLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
