/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* user/csum.h: the checksum of backups' host copies (user/csum.c). */
#ifndef GPUSLEEP_USER_CSUM_H
#define GPUSLEEP_USER_CSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* CRC-32C of buf in three lanes, folded into 64 bits with n. */
GS_HIDDEN uint64_t gs_csum(const void *buf, size_t n);
/* The same without the CPU's CRC instruction (the tests compare them). */
GS_HIDDEN uint64_t gs_csum_table(const void *buf, size_t n);
/* Whether gs_csum runs on the CPU's CRC instruction (else a table). */
GS_HIDDEN bool gs_csum_hw(void);

#endif /* GPUSLEEP_USER_CSUM_H */
