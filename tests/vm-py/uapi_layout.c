// SPDX-License-Identifier: GPL-2.0
/*
 * Prints the layout of every struct the Python bindings mirror with ctypes
 * (user/python/gpusleep/_lib.py), as the C compiler sees it:
 *   STRUCT FIELD OFFSET SIZE
 *   STRUCT - 0 SIZEOF
 * tests/host/test_python.py and tests/vm-py/ compare ctypes against it.
 */
#include <stddef.h>
#include <stdio.h>

#include "libgpusleep.h"

#define F(s, f) printf("%s %s %zu %zu\n", #s, #f, offsetof(struct s, f), \
		       sizeof(((struct s *)0)->f))
#define S(s) printf("%s - 0 %zu\n", #s, sizeof(struct s))

int main(void)
{
	F(gpusleep_api, api);
	F(gpusleep_api, max_domains);
	F(gpusleep_api, features);
	F(gpusleep_api, reserved);
	S(gpusleep_api);
	F(gpusleep_create, name);
	F(gpusleep_create, gpu);
	F(gpusleep_create, caps);
	F(gpusleep_create, flags);
	F(gpusleep_create, id);
	F(gpusleep_create, pad);
	F(gpusleep_create, reserved);
	F(gpusleep_create, nr_tags);
	F(gpusleep_create, pad2);
	F(gpusleep_create, tags);
	S(gpusleep_create);
	F(gpusleep_tag, name);
	F(gpusleep_tag, kind);
	F(gpusleep_tag, flags);
	F(gpusleep_tag, generation);
	F(gpusleep_tag, reserved);
	S(gpusleep_tag);
	F(gpusleep_tags, nr_tags);
	F(gpusleep_tags, pad);
	F(gpusleep_tags, reserved);
	F(gpusleep_tags, tags);
	S(gpusleep_tags);
	F(gpusleep_attach, id);
	F(gpusleep_attach, role);
	F(gpusleep_attach, flags);
	F(gpusleep_attach, pad);
	F(gpusleep_attach, reserved);
	S(gpusleep_attach);
	F(gpusleep_op, tags);
	F(gpusleep_op, flags);
	F(gpusleep_op, timeout_ms);
	F(gpusleep_op, reason);
	F(gpusleep_op, op_id);
	F(gpusleep_op, bad_tags);
	F(gpusleep_op, pad);
	F(gpusleep_op, reserved);
	S(gpusleep_op);
	F(gpusleep_result, op_id);
	F(gpusleep_result, kind);
	F(gpusleep_result, tags);
	F(gpusleep_result, error);
	F(gpusleep_result, reason);
	F(gpusleep_result, done_tags);
	F(gpusleep_result, pad);
	F(gpusleep_result, duration_ns);
	F(gpusleep_result, bytes);
	F(gpusleep_result, freed_bytes);
	F(gpusleep_result, shortfall_tags);
	F(gpusleep_result, lost_tags);
	S(gpusleep_result);
	F(gpusleep_wait, op_id);
	F(gpusleep_wait, timeout_ms);
	F(gpusleep_wait, pad);
	F(gpusleep_wait, reserved);
	F(gpusleep_wait, result);
	S(gpusleep_wait);
	F(gpusleep_state, id);
	F(gpusleep_state, state);
	F(gpusleep_state, released);
	F(gpusleep_state, flags);
	F(gpusleep_state, caps);
	F(gpusleep_state, unconfirmed);
	F(gpusleep_state, op_in_flight);
	F(gpusleep_state, last_op_id);
	F(gpusleep_state, bytes_released);
	F(gpusleep_state, freed_bytes);
	F(gpusleep_state, shortfall);
	F(gpusleep_state, pad2);
	F(gpusleep_state, resident_bytes);
	F(gpusleep_state, resident_source);
	F(gpusleep_state, pad3);
	F(gpusleep_state, generation);
	F(gpusleep_state, reserved);
	F(gpusleep_state, last);
	S(gpusleep_state);
	F(gpusleep_eventfd, fd);
	F(gpusleep_eventfd, events);
	F(gpusleep_eventfd, reserved);
	S(gpusleep_eventfd);
	F(gpusleep_event, size);
	F(gpusleep_event, op_id);
	F(gpusleep_event, type);
	F(gpusleep_event, tags);
	F(gpusleep_event, flags);
	F(gpusleep_event, step);
	F(gpusleep_event, pad);
	F(gpusleep_event, generation);
	S(gpusleep_event);
	F(gpusleep_complete, op_id);
	F(gpusleep_complete, step);
	F(gpusleep_complete, type);
	F(gpusleep_complete, status);
	F(gpusleep_complete, flags);
	F(gpusleep_complete, bytes);
	F(gpusleep_complete, freed_bytes);
	F(gpusleep_complete, lost_bytes);
	F(gpusleep_complete, resident_bytes);
	F(gpusleep_complete, resident_source);
	F(gpusleep_complete, pad);
	S(gpusleep_complete);
	F(gs_engine_ops, drain);
	F(gs_engine_ops, drain_cancelled);
	F(gs_engine_ops, reset_caches);
	F(gs_engine_ops, repair_kv);
	F(gs_engine_ops, resume_sched);
	S(gs_engine_ops);
	F(gs_engine_config, dev_path);
	F(gs_engine_config, name);
	F(gs_engine_config, gpu);
	F(gs_engine_config, caps);
	F(gs_engine_config, flags);
	S(gs_engine_config);
	F(gs_mm_tag_info, policy);
	F(gs_mm_tag_info, paused);
	F(gs_mm_tag_info, nr_chunks);
	F(gs_mm_tag_info, nr_allocs);
	F(gs_mm_tag_info, chunk_bytes);
	F(gs_mm_tag_info, mapped_bytes);
	F(gs_mm_tag_info, used_bytes);
	F(gs_mm_tag_info, staging);
	F(gs_mm_tag_info, staging_bytes);
	F(gs_mm_tag_info, pauses);
	F(gs_mm_tag_info, resumes);
	F(gs_mm_tag_info, lost);
	F(gs_mm_tag_info, pad);
	S(gs_mm_tag_info);
	F(gs_agent_stats, events);
	F(gs_agent_stats, pauses);
	F(gs_agent_stats, resumes);
	F(gs_agent_stats, failures);
	F(gs_agent_stats, complete_errors);
	F(gs_agent_stats, released_bytes);
	F(gs_agent_stats, freed_bytes);
	F(gs_agent_stats, shortfalls);
	F(gs_agent_stats, lost_bytes);
	S(gs_agent_stats);
	F(gs_mm_result, status);
	F(gs_mm_result, flags);
	F(gs_mm_result, bytes);
	F(gs_mm_result, unmapped_bytes);
	F(gs_mm_result, lost_bytes);
	F(gs_mm_result, freed_bytes);
	F(gs_mm_result, free_before);
	F(gs_mm_result, free_after);
	F(gs_mm_result, duration_ns);
	F(gs_mm_result, copy_ns);
	S(gs_mm_result);
	F(gs_agent_result, op_id);
	F(gs_agent_result, type);
	F(gs_agent_result, tag);
	F(gs_agent_result, complete_ret);
	F(gs_agent_result, pad);
	F(gs_agent_result, mm);
	F(gs_agent_result, resident_bytes);
	F(gs_agent_result, resident_source);
	F(gs_agent_result, pad2);
	F(gs_agent_result, generation);
	S(gs_agent_result);
	return 0;
}
