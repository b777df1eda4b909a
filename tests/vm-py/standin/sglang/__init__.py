# SPDX-License-Identifier: GPL-2.0
"""A stand-in for the one SGLang module gpusleep.sglang imports:
sglang.srt.managers.io_struct's AbortReq (tests/vm-py/standin/
sglang_scheduler.py is the scheduler)."""
