# SPDX-License-Identifier: GPL-2.0
"""SGLang's memory tags. Models sglang 0.5.23 (sglang/srt/constants.py):
GPU_MEMORY_ALL_TYPES is the order release_memory_occupation pauses
them in, and what it pauses when given no tags."""

GPU_MEMORY_TYPE_KV_CACHE = "kv_cache"
GPU_MEMORY_TYPE_WEIGHTS = "weights"
GPU_MEMORY_TYPE_CUDA_GRAPH = "cuda_graph"

GPU_MEMORY_ALL_TYPES = [
    GPU_MEMORY_TYPE_KV_CACHE,
    GPU_MEMORY_TYPE_WEIGHTS,
    GPU_MEMORY_TYPE_CUDA_GRAPH,
]
