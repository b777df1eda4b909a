# SPDX-License-Identifier: GPL-2.0
"""Run by tests/vm-py/test_py_dist.py with the venv's python, the stand-in
torch on PYTHONPATH: SGLang's way of using torch_memory_saver across a
spawn. The parent imports torch_memory_saver (the installed
gpusleep-torch-memory-saver) for configure_subprocess() only and starts a
scheduler process with the spawn start method; the child, a fresh
interpreter, imports torch_memory_saver itself, allocates weights and KV
cache in regions as SGLang does, and pauses / resumes each tag through
the kernel module (its domain named by GPUSLEEP_DOMAIN_NAME, inherited).
Prints "ok" or raises."""

import ctypes
import multiprocessing as mp
import os
import sys

SIZE = 1 << 20


def ptr(t):
    return t.data_ptr() if hasattr(t, "data_ptr") else t


def child(venv, q):
    try:
        import torch
        import torch_memory_saver
        import gpusleep
        assert torch_memory_saver.__file__.startswith(venv), \
            torch_memory_saver.__file__
        saver = torch_memory_saver.torch_memory_saver
        # TMS's public surface, on the module and on its object
        for n in ("region", "cuda_graph", "pause", "resume", "enabled",
                  "disable"):
            assert hasattr(torch_memory_saver, n), n
            assert hasattr(saver, n), n
        assert callable(torch_memory_saver.configure_subprocess)
        assert torch_memory_saver.TorchMemorySaver() is saver
        # configure_subprocess() preloaded the venv's hook library here
        pre = os.environ.get("LD_PRELOAD", "")
        assert "torch_memory_saver_hook_mode_preload" in pre and \
            pre.startswith(venv), pre
        saver.hook_mode = "torch"		# what SGLang sets on XPU
        assert saver._impl is None, "initialised before its first use"
        assert saver.enabled, "not enabled"
        with saver.region(tag="weights", enable_cpu_backup=True):
            w = ptr(torch.empty(SIZE))
        with saver.region(tag="kv_cache", enable_cpu_backup=False):
            k = ptr(torch.empty(SIZE))
        assert saver._impl._hook_mode == "torch"
        # slime's read: the preloaded hook library's settings
        cdll = saver._impl._binary_wrapper.cdll
        assert cdll.tms_get_interesting_region() is False
        want = bytes(range(256)) * (SIZE // 256)
        ctypes.memmove(w, want, SIZE)
        ctypes.memset(k, 0xcd, SIZE)
        name = os.environ["GPUSLEEP_DOMAIN_NAME"]
        saver.pause(tag="kv_cache")
        saver.pause(tag="weights")
        st = gpusleep.state(name)
        assert st.released == ["weights", "kv_cache"], st.released
        saver.resume(tag="weights")
        assert ctypes.string_at(w, SIZE) == want, "weights changed"
        saver.resume(tag="kv_cache")
        assert ctypes.string_at(k, SIZE) == bytes(SIZE), "KV not zero"
        assert not gpusleep.is_sleeping(name)
        q.put("ok")
    except BaseException as e:	# the parent reports it
        import traceback
        q.put("child: " + "".join(traceback.format_exception(e)))


def main(venv):
    import torch_memory_saver
    mp.set_start_method("spawn")
    q = mp.Queue()
    with torch_memory_saver.configure_subprocess():
        p = mp.Process(target=child, args=(venv, q))
        p.start()
    out = q.get(timeout=240)
    p.join(60)
    assert out == "ok", out
    assert p.exitcode == 0, p.exitcode
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
