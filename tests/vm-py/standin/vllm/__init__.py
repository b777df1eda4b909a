# SPDX-License-Identifier: GPL-2.0
"""A stand-in for the parts of vLLM that its sleep mode goes through, as
vLLM's sources have them (vllm/plugins/__init__.py,
vllm/device_allocator/cumem.py, vllm/v1/worker/gpu_worker.py; read, not
copied): the general plugins loaded from their entry points, the
CuMemAllocator singleton the worker asks for, and the worker's calls to it
in the order it makes them. Used by tests/vm-py/test_py_dist.py."""
