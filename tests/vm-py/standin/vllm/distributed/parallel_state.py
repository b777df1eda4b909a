# SPDX-License-Identifier: GPL-2.0
"""The process groups of a worker, what gpusleep's vLLM backend uses of
them. Models vllm 0.33.0 (vllm/distributed/parallel_state.py):

- init_distributed_environment(world_size, rank, ...) makes the world
  group; ensure_model_parallel_initialized(tp, pp, ...) the tensor-
  parallel groups, TP the innermost dimension (ranks r with the same
  r // tp); model_parallel_is_initialized() and get_tp_group() /
  get_world_group() (which assert they were made);
- GroupCoordinator: ranks, world_size, rank_in_group; barrier() over the
  CPU group; broadcast_object(obj, src) (the TP group's message-queue
  broadcaster takes src 0 only, asserted).
Instead of torch.distributed's gloo, the processes meet over a UNIX
socket: distributed_init_method "file://PATH" (rank 0 listens on PATH,
the others connect); a world of one needs none."""

import os
import time
from multiprocessing.connection import Client, Listener

STANDIN_ONLY = ("_StandinLink", "_link")

_WORLD = None
_TP = None
_PP = None
_link = None


class _StandinLink:
    """One connection per other rank at rank 0, one to rank 0 elsewhere:
    enough for a barrier and a broadcast from rank 0."""

    def __init__(self, path, rank, world_size):
        self.rank, self.world_size = rank, world_size
        if rank == 0:
            lis = Listener(path, "AF_UNIX")
            self.peers = {}
            while len(self.peers) < world_size - 1:
                c = lis.accept()
                self.peers[c.recv()] = c
            lis.close()
        else:
            deadline = time.monotonic() + 120
            while True:
                try:
                    self.conn = Client(path, "AF_UNIX")
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            self.conn.send(rank)

    def barrier(self):
        if self.rank == 0:
            for c in self.peers.values():
                assert c.recv() == "barrier"
            for c in self.peers.values():
                c.send("go")
        else:
            self.conn.send("barrier")
            assert self.conn.recv() == "go"

    def broadcast(self, obj):
        if self.rank == 0:
            for c in self.peers.values():
                c.send(obj)
            return obj
        return self.conn.recv()


class GroupCoordinator:
    def __init__(self, group_ranks, local_rank, torch_distributed_backend,
                 use_device_communicator, use_message_queue_broadcaster=False,
                 group_name=None, use_all2all=False):
        self.unique_name = group_name
        self.rank = _link.rank if _link is not None else 0
        self.local_rank = local_rank
        for ranks in group_ranks:
            if self.rank in ranks:
                self.ranks = ranks
                self.world_size = len(ranks)
                self.rank_in_group = ranks.index(self.rank)
        self.use_message_queue_broadcaster = use_message_queue_broadcaster

    def barrier(self):
        if self.world_size > 1:
            _link.barrier()

    def broadcast_object(self, obj=None, src=0):
        assert src < self.world_size, f"Invalid src rank ({src})"
        if self.world_size == 1:
            return obj
        if self.use_message_queue_broadcaster:
            assert src == 0, "Message queue broadcaster only supports src=0"
        return _link.broadcast(obj)


def get_world_group():
    assert _WORLD is not None, "world group is not initialized"
    return _WORLD


def get_tp_group():
    assert _TP is not None, "tensor model parallel group is not initialized"
    return _TP


def init_distributed_environment(world_size=-1, rank=-1,
                                 distributed_init_method="env://",
                                 local_rank=-1, backend="nccl", timeout=None):
    global _WORLD, _link
    if world_size > 1 and _link is None:
        assert distributed_init_method.startswith("file://"), \
            distributed_init_method
        _link = _StandinLink(distributed_init_method[len("file://"):], rank,
                             world_size)
    if _WORLD is None:
        _WORLD = GroupCoordinator([list(range(max(world_size, 1)))],
                                  local_rank, backend, False,
                                  group_name="world")


def ensure_model_parallel_initialized(tensor_model_parallel_size,
                                      pipeline_model_parallel_size,
                                      prefill_context_model_parallel_size=1,
                                      decode_context_model_parallel_size=1,
                                      backend=None):
    global _TP, _PP
    if _TP is not None:
        return
    world = get_world_group().world_size
    tp = tensor_model_parallel_size
    _TP = GroupCoordinator([list(range(i, i + tp))
                            for i in range(0, world, tp)],
                           get_world_group().local_rank, backend, True,
                           use_message_queue_broadcaster=True,
                           group_name="tp")
    _PP = GroupCoordinator([list(range(i, world, tp)) for i in range(tp)],
                           get_world_group().local_rank, backend, True,
                           group_name="pp")


def model_parallel_is_initialized():
    return _TP is not None and _PP is not None
