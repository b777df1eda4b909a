#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""asyncio: a trainer awaiting operations (Controller.wait_async: an eventfd
registered for OP_DONE, woken through loop.add_reader), and an engine
served from an asyncio loop that answers its drain later, once its
"in-flight requests" are done. SKIPs without /dev/gpusleep."""

import asyncio
import os

from gstest import Tap, Proc, check, need_device, GUARD_S
import gpusleep
from gpusleep import agent as gsagent, engine as gsengine

NAME = f"pyasync{os.getpid()}"
TESTS = ["wait_async woken when the held drain is answered",
         "wait_async raises Cancelled for a cancelled release",
         "wait_async(0) on the newest operation, already finished",
         "engine on an asyncio loop answers its drain later"]
S = {}


async def guard(aw):
    return await asyncio.wait_for(aw, GUARD_S)	# a hang guard only


def woken():
    c, eng = S["ctl"], S["eng"]

    async def main():
        op = c.release(wait=False)
        task = asyncio.create_task(c.wait_async(op))
        for _ in range(20):
            await asyncio.sleep(0)
        # the engine holds the drain: the operation cannot have finished
        check(not task.done(), "finished before the drain was answered")
        eng.expect("ev drain ")
        eng.ask("complete 0", "completed ")
        r = await guard(task)
        check(r.ok and r.op_id == op, repr(r))
        check(r.tags == ["weights", "kv_cache"], repr(r))
        check(c.is_sleeping(), "sleeping")
        r2 = await guard(c.wait_async(c.resume(wait=False)))
        check(r2.ok and r2.kind == "resume", repr(r2))
    asyncio.run(main())


def cancelled():
    c, eng = S["ctl"], S["eng"]

    async def main():
        op = c.release(["kv_cache"], wait=False)
        task = asyncio.create_task(c.wait_async(op))
        eng.expect("ev drain ")
        await asyncio.sleep(0)
        check(not task.done(), "finished early")
        c.resume(wait=False)
        try:
            await guard(task)
        except gpusleep.Cancelled as e:
            check(e.op_id == op, "op id")
        else:
            raise AssertionError("no Cancelled")
    asyncio.run(main())
    eng.expect("ev cancelled")


def newest():
    c = S["ctl"]

    async def main():
        r = await guard(c.wait_async(0))
        check(r.op_id == c.state().last_op_id, repr(r))
    asyncio.run(main())


def engine_loop():
    async def main():
        loop = asyncio.get_running_loop()
        log = []
        sched = asyncio.Event()

        def drain(tags, abort):
            log.append(("drain", tuple(tags)))
            # in-flight requests end a few loop turns later
            loop.call_soon(loop.call_soon, finish)
            return gsengine.PENDING

        def finish():
            log.append(("done", eng.pending))
            eng.complete(0)

        eng = gsengine.Engine(NAME + "loop", drain=drain,
                              reset_caches=lambda: log.append(("reset",)),
                              repair_kv=lambda: log.append(("repair",)),
                              resume_sched=lambda: (log.append(("sched",)),
                                                    sched.set()))
        mm = gsagent.MemoryManager("host")
        mm.set_policy("weights", backup=True)
        w = mm.alloc("weights", 1 << 20)
        w.view[:5] = b"hello"
        ag = gsagent.Agent(eng.id, mm)
        eng.add_to_loop(loop)
        try:
            with gpusleep.Controller(eng.id) as c:
                # a blocking release on a worker thread; the loop serves
                r = await guard(loop.run_in_executor(None, c.release))
                check(r.ok, repr(r))
                check(log[:3] == [("drain", ("weights", "kv_cache")),
                                  ("done", True), ("reset",)], repr(log))
                r = await guard(c.wait_async(c.resume(wait=False)))
                check(r.ok, repr(r))
                await guard(sched.wait())	# RESUME_SCHED came
                check(("repair",) in log and ("sched",) in log, repr(log))
                check(bytes(w.view[:5]) == b"hello", "weights kept")
        finally:
            eng.remove_from_loop()
            ag.close()
            eng.close()
            mm.close()
    asyncio.run(main())


def main():
    tap = Tap(TESTS)
    need_device(tap, TESTS)
    S["eng"] = Proc("engine", NAME, "--hold")
    try:
        S["id"] = int(S["eng"].expect("ready ")[0])
        S["agent"] = Proc("agent", S["id"], 1)
        S["agent"].expect("ready ")
        S["ctl"] = gpusleep.Controller(S["id"])
        for name, fn in zip(TESTS, [woken, cancelled, newest, engine_loop]):
            tap.run(name, fn)
    finally:
        for k in ("eng", "agent"):
            if k in S:
                S[k].close()
    tap.done()


if __name__ == "__main__":
    main()
