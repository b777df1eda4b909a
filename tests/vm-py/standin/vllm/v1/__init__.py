# SPDX-License-Identifier: GPL-2.0
"""A package of the vLLM stand-in. Models vllm 0.33.0."""
