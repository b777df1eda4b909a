# SPDX-License-Identifier: GPL-2.0
"""vLLM's distributed package. Models vllm 0.33.0 (vllm/distributed/):
only parallel_state here."""
