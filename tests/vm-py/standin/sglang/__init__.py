# SPDX-License-Identifier: GPL-2.0
"""A stand-in for the parts of SGLang that gpusleep.sglang and its
scheduler patch go through. Models sglang 0.5.23 (its sources, read, not
copied): each module here has the path of the real one and what it
defines is checked against it by tests/host/test_standins.py. The
scheduler process the tests run is tests/vm-py/standin/sglang_rank.py."""
