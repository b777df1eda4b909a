# SPDX-License-Identifier: LGPL-2.1-or-later
"""ctypes view of libgpusleep and of the uAPI (uapi/linux/gpusleep.h).

Everything here mirrors a C declaration; the layouts are checked against the
C compiler's by tests/host/test_python.py and tests/vm-py/ (offsets and sizes
printed by tests/vm-py/uapi_layout.c). The library is loaded on first use,
not at import, so ``import gpusleep`` works without it.

Where the library comes from, first found wins:
  0. the copy already loaded in the process (by torch_memory_saver's
     hook libraries, which load it: user/tms/hook.c),
  1. the package directory (a copy vendored next to this file),
  2. $GPUSLEEP_LIB (a path to libgpusleep.so.0),
  3. the directory ``make install`` put it in (_install.py, when installed),
  4. the build tree this file sits in (build/lib of the repository),
  5. the system's search path (ldconfig, LD_LIBRARY_PATH).
"""

import ctypes
import errno
import os
import threading

SONAME = "libgpusleep.so.0"

# ------------------------------------------------------------------ uAPI
API_VERSION = 1

TAG_WEIGHTS = 1 << 0
TAG_KV_CACHE = 1 << 1
TAG_ALL = TAG_WEIGHTS | TAG_KV_CACHE
NR_TAGS = 2
MAX_TAGS = 8
TAG_NAMES = ("weights", "kv_cache")	# the default declaration, in order
TAG_NAME_LEN = 16
TAG_KIND_MEMORY = 0
TAG_KIND_KV_CACHE = 1
RESIDENT_PROCESS = 1
RESIDENT_DEVICE = 2
# whose view resident_bytes is, by GPUSLEEP_RESIDENT_* (0: not reported)
RESIDENT_SOURCES = (None, "process", "device")

NAME_LEN = 32
GPU_LEN = 64

ROLE_ENGINE = 1
ROLE_AGENT = 2
ROLE_CONTROLLER = 3

CAP_PREFIX_CACHING = 1 << 0
CAP_PREFIX_CACHE_RESET = 1 << 1
CREATEF_SHARED = 1 << 0

OP_RELEASE = 1
OP_RESUME = 2
OPF_ABORT_INFLIGHT = 1 << 0
OPF_NONBLOCK = 1 << 1

SF_DRAIN_PENDING = 1 << 0
SF_OP_IN_FLIGHT = 1 << 1
SF_AGENT_ATTACHED = 1 << 2
SF_KV_RELEASE_ALLOWED = 1 << 3
SF_SCHED_PAUSED = 1 << 4
SF_DEAD = 1 << 5
SF_KV_REPAIR_PENDING = 1 << 6
SF_AGENT_UNCONFIRMED = 1 << 7

EFD_DRAINED = 1 << 0
EFD_OP_DONE = 1 << 1

EV_DRAIN = 1
EV_DRAIN_CANCELLED = 2
EV_RESET_CACHES = 3
EV_REPAIR_KV = 4
EV_RESUME_SCHED = 5
EV_PAUSE_TAG = 6
EV_RESUME_TAG = 7
EVF_ABORT_INFLIGHT = 1 << 0
EVF_MAY_SCHEDULE = 1 << 1

# enum gpusleep_reason
R_NONE = 0
R_NOT_ENABLED = 1
R_INVALID = 2
R_KV_NOT_ALLOWED = 3
R_ALREADY_RELEASED = 4
R_BUSY = 5
R_NOT_RELEASED = 6
R_CANCELLED = 7
R_DRAIN_TIMEOUT = 8
R_AGENT_TIMEOUT = 9
R_ENGINE_FAILED = 10
R_AGENT_FAILED = 11
R_AGENT_GONE = 12
R_ENGINE_GONE = 13
R_NO_MEMORY = 14
R_QUEUE_FULL = 15
R_ENGINE_TIMEOUT = 16
R_LEASED = 17
R_HOST_BUDGET = 18
R_VERIFY_FAILED = 19
R_SHORTFALL = 20
R_MAX = 21

# enum gpusleep_dstate
STATE_NAMES = ("awake", "draining", "releasing", "released", "resuming",
               "dead")

# libgpusleep.h
GS_PENDING = 1
GS_MM_DISCARD = 0
GS_MM_BACKUP = 1
GS_MM_ALIGN = 512

u8, u32, s32, u64 = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_int32, \
    ctypes.c_uint64


class gpusleep_api(ctypes.Structure):
    _fields_ = [("api", u32), ("max_domains", u32), ("features", u64),
                ("reserved", u64 * 2)]


class gpusleep_tag(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * TAG_NAME_LEN), ("kind", u32),
                ("flags", u32), ("generation", u64), ("reserved", u64)]


class gpusleep_create(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * NAME_LEN),
                ("gpu", ctypes.c_char * GPU_LEN),
                ("caps", u32), ("flags", u32), ("id", u32), ("pad", u32),
                ("reserved", u64 * 2), ("nr_tags", u32), ("pad2", u32),
                ("tags", gpusleep_tag * MAX_TAGS)]


class gpusleep_tags(ctypes.Structure):
    _fields_ = [("nr_tags", u32), ("pad", u32), ("reserved", u64 * 3),
                ("tags", gpusleep_tag * MAX_TAGS)]


class gpusleep_attach(ctypes.Structure):
    _fields_ = [("id", u32), ("role", u32), ("flags", u32), ("pad", u32),
                ("reserved", u64 * 2)]


class gpusleep_op(ctypes.Structure):
    _fields_ = [("tags", u32), ("flags", u32), ("timeout_ms", u32),
                ("reason", u32), ("op_id", u64), ("bad_tags", u32),
                ("pad", u32), ("reserved", u64 * 2)]


class gpusleep_result(ctypes.Structure):
    _fields_ = [("op_id", u64), ("kind", u32), ("tags", u32),
                ("error", s32), ("reason", u32), ("done_tags", u32),
                ("pad", u32), ("duration_ns", u64),
                ("bytes", u64 * MAX_TAGS), ("freed_bytes", u64 * MAX_TAGS),
                ("shortfall_tags", u32), ("lost_tags", u32)]


class gpusleep_wait(ctypes.Structure):
    _fields_ = [("op_id", u64), ("timeout_ms", u32), ("pad", u32),
                ("reserved", u64 * 2), ("result", gpusleep_result)]


class gpusleep_state(ctypes.Structure):
    _fields_ = [("id", u32), ("state", u32), ("released", u32),
                ("flags", u32), ("caps", u32), ("unconfirmed", u32),
                ("op_in_flight", u64), ("last_op_id", u64),
                ("bytes_released", u64 * MAX_TAGS),
                ("freed_bytes", u64 * MAX_TAGS), ("shortfall", u32),
                ("pad2", u32), ("resident_bytes", u64),
                ("resident_source", u32), ("pad3", u32),
                ("generation", u64 * MAX_TAGS), ("reserved", u64 * 2),
                ("last", gpusleep_result)]


class gpusleep_eventfd(ctypes.Structure):
    _fields_ = [("fd", s32), ("events", u32), ("reserved", u64)]


class gpusleep_event(ctypes.Structure):
    _fields_ = [("size", u32), ("type", u32), ("op_id", u64), ("tags", u32),
                ("flags", u32), ("step", u32), ("pad", u32),
                ("generation", u64), ("deadline_ns", u64)]


class gpusleep_complete(ctypes.Structure):
    _fields_ = [("op_id", u64), ("step", u32), ("type", u32),
                ("status", s32), ("flags", u32), ("bytes", u64),
                ("freed_bytes", u64), ("lost_bytes", u64),
                ("resident_bytes", u64), ("resident_source", u32),
                ("pad", u32)]


# ------------------------------------------------------------ libgpusleep
DRAIN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                            u32, ctypes.c_bool)
VOID_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
INT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class gs_engine_ops(ctypes.Structure):
    _fields_ = [("drain", DRAIN_FN), ("drain_cancelled", VOID_FN),
                ("reset_caches", INT_FN), ("repair_kv", INT_FN),
                ("resume_sched", VOID_FN)]


class gs_engine_config(ctypes.Structure):
    _fields_ = [("dev_path", ctypes.c_char_p), ("name", ctypes.c_char_p),
                ("gpu", ctypes.c_char_p), ("caps", u32), ("flags", u32),
                ("tags", ctypes.POINTER(gpusleep_tag)),
                ("nr_tags", ctypes.c_uint)]


class gs_mm_tag_info(ctypes.Structure):
    _fields_ = [("policy", u32), ("paused", u32), ("nr_chunks", u32),
                ("nr_allocs", u32), ("chunk_bytes", u64),
                ("mapped_bytes", u64), ("used_bytes", u64),
                ("staging", ctypes.c_void_p), ("staging_bytes", u64),
                ("pauses", u64), ("resumes", u64), ("lost", u32),
                ("content", u32), ("verified", u32), ("pad", u32)]


class gs_agent_stats(ctypes.Structure):
    _fields_ = [("events", u64), ("pauses", u64), ("resumes", u64),
                ("failures", u64), ("complete_errors", u64),
                ("released_bytes", u64), ("freed_bytes", u64),
                ("shortfalls", u64), ("lost_bytes", u64)]


class gs_mm_result(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int32), ("flags", u32), ("bytes", u64),
                ("unmapped_bytes", u64), ("lost_bytes", u64),
                ("freed_bytes", u64), ("free_before", u64),
                ("free_after", u64), ("duration_ns", u64),
                ("copy_ns", u64), ("copied_bytes", u64),
                ("verify_ns", u64), ("verify_bytes", u64)]


class gs_agent_result(ctypes.Structure):
    _fields_ = [("op_id", u64), ("type", u32), ("tag", u32),
                ("complete_ret", ctypes.c_int32), ("pad", u32),
                ("mm", gs_mm_result), ("resident_bytes", u64),
                ("resident_source", u32), ("pad2", u32),
                ("generation", u64)]


# Groups (docs/groups.md)
GROUP_MAX_RANKS = 64
GROUP_NO_RANK = 0xffffffff
GRF_DONE = 1 << 0
GRF_FAILED = 1 << 1
GRF_CANCELLED = 1 << 2
GRF_ROLLED_BACK = 1 << 3
GRF_STILL_RELEASED = 1 << 4
GRF_RUNNING = 1 << 5
GROUP_RF_SETTLING = 1 << 0


class gpusleep_group_create(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * NAME_LEN), ("flags", u32),
                ("id", u32), ("reserved", u64 * 2)]


class gpusleep_group_add(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_int32), ("flags", u32), ("rank", u32),
                ("domain", u32), ("reserved", u64 * 2)]


class gpusleep_group_op(ctypes.Structure):
    _fields_ = [("tags", u32), ("flags", u32), ("timeout_ms", u32),
                ("reason", u32), ("op_id", u64), ("rank", u32),
                ("domain", u32), ("bad_tags", u32), ("pad", u32),
                ("reserved", u64 * 2)]


class gpusleep_group_rank(ctypes.Structure):
    _fields_ = [("domain", u32), ("flags", u32), ("op_id", u64),
                ("rollback_op_id", u64), ("error", ctypes.c_int32),
                ("reason", u32), ("released", u32), ("pad", u32)]


class gpusleep_group_result(ctypes.Structure):
    _fields_ = [("op_id", u64), ("kind", u32), ("tags", u32),
                ("error", ctypes.c_int32), ("reason", u32), ("rank", u32),
                ("domain", u32), ("nr_ranks", u32), ("pad", u32),
                ("duration_ns", u64), ("flags", u32), ("pad2", u32),
                ("settle_op_id", u64)]


class gpusleep_group_wait(ctypes.Structure):
    _fields_ = [("op_id", u64), ("timeout_ms", u32), ("nr_ranks", u32),
                ("ranks", u64), ("rank_size", u32), ("pad", u32),
                ("reserved", u64 * 2), ("result", gpusleep_group_result)]


GS_MM_RES_MEASURED = 1 << 0
GS_MM_RES_SHORTFALL = 1 << 1
GS_MM_RES_PARTIAL = 1 << 2
GS_MM_RES_FAULT = 1 << 3
GS_MM_RES_VERIFIED = 1 << 4
GS_MM_RES_VERIFY_FAILED = 1 << 5
#: What a tag holds after a resume (GPUSLEEP_CONTENT_*, GS_MM_CONTENT_*)
CONTENTS = ("undefined", "zeroed", "kept")
GS_MM_STAGING_LAZY = 1 << 0
GS_MM_STAGING_FREE_AFTER_RESUME = 1 << 1

# Tenants, reclaims and leases (docs/arbiter.md)
FEAT_TENANTS = 1 << 9
POLICY_DISCARD = 0
POLICY_BACKUP = 1
POLICIES = ("discard", "backup")
CONTENT_UNDEFINED = 0
CONTENT_ZEROED = 1
CONTENT_KEPT = 2
RTF_VERIFIED = 1 << 0
PRIO_MIN = -1000
PRIO_MAX = 1000
TENF_YIELDABLE = 1 << 0
RECLAIMF_LEASE = 1 << 0
RECLAIMF_NONBLOCK = 1 << 1
RECLAIMF_PARTIAL = 1 << 2
RECLAIMF_DISCARD_ONLY = 1 << 3
# GPUSLEEP_RWHY_*, in bit order
RWHY_NAMES = ("no_candidate", "priority", "not_permitted", "refused",
              "host_budget", "deadline", "cancelled")
RECLAIM_RUNNING = 1
RECLAIM_DONE = 2
# GPUSLEEP_RVF_*, in bit order
RVF_NAMES = ("unmeasured", "group", "failed", "rolled_back",
             "still_released", "cancelled", "returned", "gone")
LEASE_STATES = (None, "taking", "held", "returning", "returned")
LEASE_RETURN_NONBLOCK = 1
GPU_UUID_LEN = 41
RECLAIM_MAX_VICTIMS = 64


def bit_names(bits: int, names: tuple[str, ...]) -> list[str]:
    """The names of the set bits (unknown ones as hex)."""
    return [names[i] if i < len(names) else hex(1 << i)
            for i in range(32) if bits & (1 << i)]


class gpusleep_report_tag(ctypes.Structure):
    _fields_ = [("size_bytes", u64), ("mapped_bytes", u64),
                ("host_bytes", u64), ("policy", u32), ("content", u32),
                ("flags", u32), ("pad", u32)]


class gpusleep_report(ctypes.Structure):
    _fields_ = [("gpu_uuid", u8 * 16), ("nr_tags", u32), ("flags", u32),
                ("torch_reserved_bytes", u64), ("graph_pool_bytes", u64),
                ("process_bytes", u64), ("process_source", u32),
                ("pad", u32), ("reserved", u64 * 4),
                ("tags", gpusleep_report_tag * MAX_TAGS)]


class gpusleep_tenant_set(ctypes.Structure):
    _fields_ = [("priority", s32), ("flags", u32), ("reserved", u64 * 2)]


class gpusleep_tenant(ctypes.Structure):
    _fields_ = [("priority", s32), ("flags", u32), ("idle_ns", u64),
                ("lease_id", u64), ("leased_tags", u32), ("pad", u32),
                ("host_charged_bytes", u64), ("reserved", u64 * 3),
                ("report", gpusleep_report)]


class gpusleep_reclaim_victim(ctypes.Structure):
    _fields_ = [("domain", u32), ("tags", u32), ("op_id", u64),
                ("freed_bytes", u64), ("error", s32), ("reason", u32),
                ("flags", u32), ("group", u32), ("resume_op_id", u64),
                ("resume_error", s32), ("resume_reason", u32)]


class gpusleep_reclaim(ctypes.Structure):
    _fields_ = [("gpu_uuid", u8 * 16), ("bytes", u64), ("priority", s32),
                ("flags", u32), ("timeout_ms", u32), ("reason", u32),
                ("op_id", u64), ("taken_bytes", u64), ("victims", u64),
                ("nr_victims", u32), ("victim_size", u32), ("why", u32),
                ("state", u32), ("lease_fd", s32), ("pad", u32),
                ("lease_id", u64), ("reserved", u64 * 2)]


class gpusleep_lease(ctypes.Structure):
    _fields_ = [("id", u64), ("reclaim_op_id", u64), ("state", u32),
                ("nr_victims", u32), ("victims", u64), ("victim_size", u32),
                ("still_released", u32), ("taken_bytes", u64),
                ("held_ns", u64), ("gpu_uuid", u8 * 16),
                ("reserved", u64 * 2)]


class gs_agent_report_stats(ctypes.Structure):
    _fields_ = [("sent", u64), ("failed", u64), ("coalesced", u64),
                ("last_error", s32), ("pad", u32)]


# Every struct the bindings mirror, by its C name (for the layout tests).
STRUCTS = {
    "gpusleep_api": gpusleep_api,
    "gpusleep_create": gpusleep_create,
    "gpusleep_tag": gpusleep_tag,
    "gpusleep_tags": gpusleep_tags,
    "gpusleep_attach": gpusleep_attach,
    "gpusleep_op": gpusleep_op,
    "gpusleep_result": gpusleep_result,
    "gpusleep_wait": gpusleep_wait,
    "gpusleep_state": gpusleep_state,
    "gpusleep_eventfd": gpusleep_eventfd,
    "gpusleep_event": gpusleep_event,
    "gpusleep_complete": gpusleep_complete,
    "gs_engine_ops": gs_engine_ops,
    "gs_engine_config": gs_engine_config,
    "gs_mm_tag_info": gs_mm_tag_info,
    "gs_agent_stats": gs_agent_stats,
    "gs_mm_result": gs_mm_result,
    "gs_agent_result": gs_agent_result,
    "gpusleep_group_create": gpusleep_group_create,
    "gpusleep_group_add": gpusleep_group_add,
    "gpusleep_group_op": gpusleep_group_op,
    "gpusleep_group_rank": gpusleep_group_rank,
    "gpusleep_group_result": gpusleep_group_result,
    "gpusleep_group_wait": gpusleep_group_wait,
    "gpusleep_report_tag": gpusleep_report_tag,
    "gpusleep_report": gpusleep_report,
    "gpusleep_tenant_set": gpusleep_tenant_set,
    "gpusleep_tenant": gpusleep_tenant,
    "gpusleep_reclaim_victim": gpusleep_reclaim_victim,
    "gpusleep_reclaim": gpusleep_reclaim,
    "gpusleep_lease": gpusleep_lease,
    "gs_agent_report_stats": gs_agent_report_stats,
}

P = ctypes.POINTER
c_int, c_uint, c_char_p, c_void_p = ctypes.c_int, ctypes.c_uint, \
    ctypes.c_char_p, ctypes.c_void_p

# name: (restype, argtypes). Pointers to opaque objects are c_void_p.
PROTOTYPES = {
    "gs_open": (c_int, [c_char_p, u64, P(gpusleep_api)]),
    "gs_create_domain": (c_int, [c_int, c_char_p, c_char_p, u32, u32,
                                 P(u32)]),
    "gs_create_domain_tags": (c_int, [c_int, c_char_p, c_char_p, u32, u32,
                                      P(gpusleep_tag), c_uint, P(u32)]),
    "gs_get_tags": (c_int, [c_int, P(gpusleep_tags)]),
    "gs_grant": (c_int, [c_int, u32]),
    "gs_attach": (c_int, [c_int, u32, u32]),
    "gs_release": (c_int, [c_int, u32, u32, u32, P(gpusleep_op)]),
    "gs_resume": (c_int, [c_int, u32, u32, u32, P(gpusleep_op)]),
    "gs_is_sleeping": (c_int, [c_int]),
    "gs_get_state": (c_int, [c_int, P(gpusleep_state)]),
    "gs_wait": (c_int, [c_int, u64, u32, P(gpusleep_result)]),
    "gs_eventfd": (c_int, [c_int, c_int, u32]),
    "gs_read_event": (c_int, [c_int, P(gpusleep_event)]),
    "gs_complete": (c_int, [c_int, P(gpusleep_event), c_int, u64]),
    "gs_complete_ex": (c_int, [c_int, P(gpusleep_event),
                               P(gpusleep_complete)]),
    "gs_reason_str": (c_char_p, [u32]),
    "gs_reason_name": (c_char_p, [u32]),
    "gs_reason_errno": (c_int, [u32]),
    "gs_state_name": (c_char_p, [u32]),
    "gs_event_name": (c_char_p, [u32]),
    "gs_tag_name": (c_char_p, [u32]),
    "gs_tags_parse": (c_int, [c_char_p, P(u32)]),
    "gs_tags_format": (c_int, [u32, c_char_p, ctypes.c_size_t]),
    # groups
    "gs_group_create": (c_int, [c_int, c_char_p, P(u32)]),
    "gs_group_open": (c_int, [c_int, c_char_p, P(u32)]),
    "gs_group_add": (c_int, [c_int, c_int, P(u32)]),
    "gs_group_release": (c_int, [c_int, u32, u32, u32,
                                 P(gpusleep_group_op)]),
    "gs_group_resume": (c_int, [c_int, u32, u32, u32,
                                P(gpusleep_group_op)]),
    "gs_group_wait": (c_int, [c_int, u64, u32, P(gpusleep_group_result),
                              P(gpusleep_group_rank), P(u32)]),
    "gs_group_eventfd": (c_int, [c_int, c_int]),
    # tenants, reclaims, leases
    "gs_set_tenant": (c_int, [c_int, s32, u32]),
    "gs_get_tenant": (c_int, [c_int, P(gpusleep_tenant)]),
    "gs_report": (c_int, [c_int, P(gpusleep_report)]),
    "gs_reclaim": (c_int, [c_int, P(u8), u64, s32, u32, u32,
                           P(gpusleep_reclaim), P(gpusleep_reclaim_victim),
                           P(u32)]),
    "gs_reclaim_wait": (c_int, [c_int, u64, u32, P(gpusleep_reclaim),
                                P(gpusleep_reclaim_victim), P(u32)]),
    "gs_lease_info": (c_int, [c_int, P(gpusleep_lease),
                              P(gpusleep_reclaim_victim), P(u32)]),
    "gs_lease_return": (c_int, [c_int, ctypes.c_bool]),
    "gs_gpu_uuid_parse": (c_int, [c_char_p, P(u8)]),
    "gs_gpu_uuid_format": (c_int, [P(u8), c_char_p, ctypes.c_size_t]),
    "gs_host_gpu_uuid": (c_int, [c_uint, P(u8)]),
    "gs_cuda_device_uuid": (c_int, [c_int, c_char_p, P(u8)]),
    "gs_rwhy_str": (c_char_p, [u32]),
    # engine
    "gs_engine_create": (c_int, [P(gs_engine_config), P(gs_engine_ops),
                                 c_void_p, P(c_void_p)]),
    "gs_engine_destroy": (None, [c_void_p]),
    "gs_engine_fd": (c_int, [c_void_p]),
    "gs_engine_id": (u32, [c_void_p]),
    "gs_engine_sched_paused": (ctypes.c_bool, [c_void_p]),
    "gs_engine_pending": (ctypes.c_bool, [c_void_p]),
    "gs_engine_replaced_tags": (u32, [c_void_p]),
    "gs_engine_kv_generation": (u64, [c_void_p]),
    "gs_engine_generation": (c_int, [c_void_p, u32, P(u64)]),
    "gs_engine_dispatch": (c_int, [c_void_p]),
    "gs_engine_complete": (c_int, [c_void_p, c_int]),
    # memory manager
    "gs_backend_host_new": (c_void_p, []),
    "gs_backend_cuda_new": (c_void_p, [c_int, c_char_p, P(c_int)]),
    "gs_mm_new": (c_int, [c_void_p, P(c_void_p)]),
    "gs_mm_destroy": (None, [c_void_p]),
    "gs_mm_set_policy": (c_int, [c_void_p, u32, c_int, ctypes.c_size_t]),
    "gs_mm_alloc": (c_void_p, [c_void_p, u32, ctypes.c_size_t]),
    "gs_mm_free": (c_int, [c_void_p, c_void_p]),
    "gs_mm_tag_of": (u32, [c_void_p, c_void_p]),
    "gs_mm_pause": (c_int, [c_void_p, u32, P(u64)]),
    "gs_mm_resume": (c_int, [c_void_p, u32, P(u64)]),
    "gs_mm_tag_info": (c_int, [c_void_p, u32, P(gs_mm_tag_info)]),
    "gs_mm_resident": (c_int, [c_void_p, P(u64)]),
    "gs_mm_pause_ex": (c_int, [c_void_p, u32, P(gs_mm_result)]),
    "gs_mm_pause_until": (c_int, [c_void_p, u32, u64, P(gs_mm_result)]),
    "gs_mm_resume_ex": (c_int, [c_void_p, u32, P(gs_mm_result)]),
    "gs_mm_trim": (c_int, [c_void_p, u32, P(u64)]),
    "gs_mm_set_fence_streams": (c_int, [c_void_p, P(c_void_p), c_uint]),
    "gs_mm_set_fence_timeout": (c_int, [c_void_p, c_uint]),
    "gs_mm_set_pin_limit": (c_int, [c_void_p, u64]),
    "gs_mm_set_verify": (c_int, [c_void_p, ctypes.c_bool]),
    "gs_mm_verify": (ctypes.c_bool, [c_void_p]),
    "gs_mm_pinned": (None, [c_void_p, P(u64), P(u64)]),
    "gs_mm_set_staging": (c_int, [c_void_p, u32, c_uint]),
    "gs_mm_pin_staging": (c_int, [c_void_p, u32, u64, P(u64)]),
    "gs_mm_gpu_uuid": (c_int, [c_void_p, P(u8)]),
    "gs_mm_generation": (u64, [c_void_p]),
    # agent
    "gs_agent_attach": (c_int, [c_char_p, u32, c_void_p, P(c_void_p)]),
    "gs_agent_destroy": (None, [c_void_p]),
    "gs_agent_fd": (c_int, [c_void_p]),
    "gs_agent_dispatch": (c_int, [c_void_p]),
    "gs_agent_start": (c_int, [c_void_p]),
    "gs_agent_stop": (c_int, [c_void_p]),
    "gs_agent_get_stats": (None, [c_void_p, P(gs_agent_stats)]),
    "gs_agent_last_result": (c_int, [c_void_p, u32, P(gs_agent_result)]),
    "gs_agent_report": (c_int, [c_void_p]),
    "gs_agent_fill_report": (c_int, [c_void_p, P(gpusleep_report)]),
    "gs_agent_set_outside": (None, [c_void_p, u64, u64]),
    "gs_agent_get_report_stats": (None, [c_void_p,
                                         P(gs_agent_report_stats)]),
    # PyTorch pluggable allocator
    "gpusleep_malloc": (c_void_p, [ctypes.c_ssize_t, c_int, c_void_p]),
    "gpusleep_free": (None, [c_void_p, ctypes.c_ssize_t, c_int, c_void_p]),
    "gpusleep_set_tag": (c_int, [c_char_p]),
    "gpusleep_declare_tags": (c_int, [c_char_p]),
    "gpusleep_mm": (c_void_p, []),
    "gpusleep_device": (c_int, []),
    "gpusleep_agent_start": (c_int, [c_uint]),
    "gpusleep_agent_stop": (c_int, []),
    "gpusleep_agent_last_result": (c_int, [c_uint, P(gs_agent_result)]),
    "gpusleep_set_outside": (c_int, [u64, u64]),
    "gpusleep_agent_report": (c_int, []),
    # tags declared on first use, policies, margin (torch_memory_saver)
    "gpusleep_tag_bit": (c_int, [c_char_p, c_int]),
    "gpusleep_tag_names": (c_int, [c_char_p, ctypes.c_size_t]),
    "gpusleep_freeze_tags": (c_int, []),
    "gpusleep_malloc_bit": (c_void_p, [c_uint, ctypes.c_ssize_t, c_int,
                                       c_void_p]),
    "gpusleep_set_backup": (c_int, [c_uint, c_int]),
    "gpusleep_set_margin": (c_int, [u64]),
    "gpusleep_set_staging_all": (c_int, [c_uint]),
    "gpusleep_agent_domain": (c_uint, []),
    "gs_mm_set_margin": (c_int, [c_void_p, u64]),
    "gs_mm_backup_ptr": (c_int, [c_void_p, c_void_p, ctypes.c_size_t,
                                 P(c_void_p)]),
    "gs_mm_backup_read": (c_int, [c_void_p, c_void_p, ctypes.c_size_t,
                                  c_void_p]),
}

_here = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_lib = None
_path = None


def candidates():
    """The paths tried, in order (the system's search path last, as the
    bare soname)."""
    out = [os.path.join(_here, SONAME)]
    env = os.environ.get("GPUSLEEP_LIB")
    if env:
        out.append(env)
    try:
        from . import _install	# written by `make python-install`
        out.append(os.path.join(_install.LIBDIR, SONAME))
    except ImportError:
        pass
    out.append(os.path.normpath(os.path.join(_here, "..", "..", "..",
                                             "build", "lib", SONAME)))
    out.append(SONAME)
    return out


def missing_message(tried):
    """What the error says when no libgpusleep loads: what is missing,
    where it was looked for, and the ways to provide it."""
    return (f"{SONAME} (libgpusleep, gpusleep's C library) not found; "
            "tried:\n  " + "\n  ".join(tried) + "\n"
            f"Install it (`make install` puts {SONAME} in PREFIX/lib), "
            "install the gpusleep wheel built by `make wheel` (it bundles "
            f"the library), or set GPUSLEEP_LIB to the path of {SONAME}.")


def _declare(lib):
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def _loaded_path():
    """The file of the libgpusleep.so.0 already loaded in this process
    (by torch_memory_saver's hook libraries, user/tms/hook.c), else None:
    one memory manager per process, so the same copy must be used."""
    try:
        ctypes.CDLL(SONAME, mode=os.RTLD_NOLOAD)
    except OSError:
        return None
    try:
        with open("/proc/self/maps") as f:
            for ln in f:
                p = ln.split(None, 5)[-1].strip()
                if os.path.basename(p).startswith("libgpusleep.so"):
                    return p
    except OSError:
        pass
    return None


def lib():
    """The loaded library (ctypes.CDLL: calls release the GIL)."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        p = _loaded_path()
        if p is not None:
            loaded = ctypes.CDLL(p, use_errno=True)
            _declare(loaded)
            _path, _lib = p, loaded
            return _lib
        for p in candidates():
            if os.sep in p and not os.path.exists(p):
                tried.append(f"{p}: no such file")
                continue
            try:
                loaded = ctypes.CDLL(p, use_errno=True)
            except OSError as e:
                tried.append(f"{p}: {e}")
                continue
            _declare(loaded)
            _path = p if os.sep not in p else os.path.realpath(p)
            _lib = loaded
            return _lib
        raise OSError(errno.ENOENT, missing_message(tried))


def path():
    """The file the library was loaded from (loads it)."""
    lib()
    return _path


# A bit no tag uses: a request carrying it is refused INVALID by the
# module, in the module's own order of checks.
TAG_UNKNOWN = 1 << 31


TAG_KINDS = {"memory": TAG_KIND_MEMORY, "kv_cache": TAG_KIND_KV_CACHE}
TAG_KIND_NAMES = {v: k for k, v in TAG_KINDS.items()}
DEFAULT_DECL = (("weights", "memory"), ("kv_cache", "kv_cache"))


def declaration(tags):
    """A tag declaration as the module takes it: tags is a list of names
    (kind memory, except "kv_cache") or of (name, kind) pairs, kind
    "memory" or "kv_cache". Returns [(name, kind name)]; the module
    checks the rest (docs/uapi.md)."""
    out = []
    for t in tags:
        if isinstance(t, str):
            name, kind = t, ("kv_cache" if t == "kv_cache" else "memory")
        else:
            name, kind = t
        if kind not in TAG_KINDS:
            from . import errors
            raise errors.InvalidRequest(
                R_INVALID, message=f"tag {name!r}: kind {kind!r}; valid: "
                f"{sorted(TAG_KINDS)}")
        out.append((name, kind))
    return out


def c_declaration(decl):
    """(gpusleep_tag array, count) of a declaration() list."""
    arr = (gpusleep_tag * MAX_TAGS)()
    if len(decl) > MAX_TAGS:
        from . import errors
        raise errors.InvalidRequest(
            R_INVALID, message=f"{len(decl)} tags: at most {MAX_TAGS}")
    for i, (name, kind) in enumerate(decl):
        b = name.encode()
        if len(b) >= TAG_NAME_LEN:
            from . import errors
            raise errors.InvalidRequest(
                R_INVALID, message=f"tag name {name!r}: at most "
                f"{TAG_NAME_LEN - 1} characters")
        arr[i].name = b
        arr[i].kind = TAG_KINDS[kind]
    return arr, len(decl)


def get_tags(fd):
    """The domain's declaration through fd: [(name, kind, generation)]."""
    t = gpusleep_tags()
    check(lib().gs_get_tags(fd, ctypes.byref(t)), "GET_TAGS")
    return [(t.tags[i].name.decode(),
             TAG_KIND_NAMES.get(t.tags[i].kind, str(t.tags[i].kind)),
             t.tags[i].generation) for i in range(t.nr_tags)]


def tags_to_mask(tags, *, names=TAG_NAMES, default=0, unknown=None):
    """None -> default; an int -> itself (unknown bits go to the kernel,
    which refuses them); a name or an iterable of names -> bits.
    [] -> ValueError (the uAPI has no empty explicit list). Unknown names
    raise errors.InvalidRequest, unless unknown is a list: then they are
    appended to it and the mask gets TAG_UNKNOWN, so that the module
    refuses the request in its own order (not enabled comes first)."""
    from . import errors
    if tags is None:
        return default
    if isinstance(tags, bool):
        raise TypeError("tags: want None, a list of names or an int")
    if isinstance(tags, int):
        if tags == 0:
            raise ValueError("tags: 0 is not an explicit tag set "
                             "(use None for the default)")
        return tags
    if isinstance(tags, str):
        tags = [tags]
    tags = list(tags)
    if not tags:
        raise ValueError("tags: an empty list is not allowed "
                         "(use None for the default)")
    mask = 0
    bad = []
    for t in tags:
        if t in names:
            mask |= 1 << names.index(t)
        else:
            bad.append(t)
    if bad and unknown is not None:
        unknown.extend(bad)
        return mask | TAG_UNKNOWN
    if bad:
        raise errors.InvalidRequest(R_INVALID,
                                    message=invalid_tags_message(bad, names))
    return mask


def invalid_tags_message(bad, names=TAG_NAMES):
    return f"invalid tags: {bad!r}; valid: {list(names)}"


def mask_to_tags(mask, names=TAG_NAMES):
    """Bits -> names in the declaration's order; unknown bits as '0x..'."""
    out = [n for i, n in enumerate(names) if mask & (1 << i)]
    rest = mask & ~((1 << len(names)) - 1)
    if rest:
        out.append(hex(rest))
    return out


def check(ret, what):
    """A libgpusleep int result: negative -> OSError(-ret)."""
    if ret < 0:
        raise OSError(-ret, f"{what}: {os.strerror(-ret)}")
    return ret
