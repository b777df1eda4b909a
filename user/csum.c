// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * gs_csum: the checksum of a backup's host copy (docs/cuda-backend.md,
 * Verification).
 *
 * CRC-32C (Castagnoli, the polynomial of iSCSI, ext4 and btrfs metadata)
 * in three lanes: the buffer's 8-byte words are cut into three contiguous
 * thirds, each summed by its own CRC chain (the crc32 instruction has a
 * latency of three cycles and a throughput of one, so three independent
 * chains keep it busy), and the three 32-bit values are folded into 64
 * bits with the length. Any change confined to one lane (one byte, a
 * burst of up to 32 bits, any odd number of flipped bits) changes that
 * lane's CRC, so it changes the result; changes in several lanes are
 * missed with a probability of about 2^-32.
 *
 * x86-64 uses SSE4.2's crc32 (checked at run time), AArch64 the CRC32
 * extension where the compiler targets it; elsewhere a table, byte by
 * byte (about 10x slower). Not a cryptographic hash: it finds corruption
 * and bugs, not tampering.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "csum.h"

#define CRC32C_POLY_REV	0x82f63b78u

static uint32_t table[256];
/*
 * 0: not made, 1: being made, 2: made. Not pthread_once: the wheel's
 * library binds nothing of glibc past 2.17 (pthread_once moved into
 * libc.so.6 at 2.34; user/python/glibc_compat.c).
 */
static int table_state;

static void table_init(void)
{
	int want = 0;

	if (__atomic_load_n(&table_state, __ATOMIC_ACQUIRE) == 2)
		return;
	if (!__atomic_compare_exchange_n(&table_state, &want, 1, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		/* another thread makes it: 256 entries, a moment */
		while (__atomic_load_n(&table_state, __ATOMIC_ACQUIRE) != 2)
			;
		return;
	}
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY_REV : c >> 1;
		table[i] = c;
	}
	__atomic_store_n(&table_state, 2, __ATOMIC_RELEASE);
}

static uint32_t sw_bytes(uint32_t crc, const unsigned char *p, size_t n)
{
	table_init();
	while (n--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

static uint32_t sw_word(uint32_t crc, uint64_t w)
{
	unsigned char b[8];

	memcpy(b, &w, 8);
	return sw_bytes(crc, b, 8);
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static void hw_lanes(const uint64_t *a, const uint64_t *b, const uint64_t *c,
		     size_t words, uint32_t crc[3])
{
	uint64_t x = crc[0], y = crc[1], z = crc[2];

	for (size_t i = 0; i < words; i++) {
		uint64_t wa, wb, wc;

		/* memcpy: the staging is 8-byte aligned, the type is not */
		memcpy(&wa, a + i, 8);
		memcpy(&wb, b + i, 8);
		memcpy(&wc, c + i, 8);
		x = _mm_crc32_u64(x, wa);
		y = _mm_crc32_u64(y, wb);
		z = _mm_crc32_u64(z, wc);
	}
	crc[0] = (uint32_t)x;
	crc[1] = (uint32_t)y;
	crc[2] = (uint32_t)z;
}

static int have_hw(void)
{
	static int hw = -1;

	if (hw < 0)
		hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
	return hw;
}
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>

static void hw_lanes(const uint64_t *a, const uint64_t *b, const uint64_t *c,
		     size_t words, uint32_t crc[3])
{
	uint32_t x = crc[0], y = crc[1], z = crc[2];

	for (size_t i = 0; i < words; i++) {
		uint64_t wa, wb, wc;

		memcpy(&wa, a + i, 8);
		memcpy(&wb, b + i, 8);
		memcpy(&wc, c + i, 8);
		x = __crc32cd(x, wa);
		y = __crc32cd(y, wb);
		z = __crc32cd(z, wc);
	}
	crc[0] = x;
	crc[1] = y;
	crc[2] = z;
}

static int have_hw(void)
{
	return 1;
}
#else
static void hw_lanes(const uint64_t *a, const uint64_t *b, const uint64_t *c,
		     size_t words, uint32_t crc[3])
{
	(void)a; (void)b; (void)c; (void)words; (void)crc;
}

static int have_hw(void)
{
	return 0;
}
#endif

static void sw_lanes(const uint64_t *a, const uint64_t *b, const uint64_t *c,
		     size_t words, uint32_t crc[3])
{
	for (size_t i = 0; i < words; i++) {
		uint64_t wa, wb, wc;

		memcpy(&wa, a + i, 8);
		memcpy(&wb, b + i, 8);
		memcpy(&wc, c + i, 8);
		crc[0] = sw_word(crc[0], wa);
		crc[1] = sw_word(crc[1], wb);
		crc[2] = sw_word(crc[2], wc);
	}
}

bool gs_csum_hw(void)
{
	return have_hw();
}

static uint64_t csum(const void *buf, size_t n, bool hw)
{
	const unsigned char *p = buf;
	size_t words = n / 24;		/* 8-byte words per lane */
	size_t lane = words * 8, done = 3 * lane;
	uint32_t crc[3] = { ~0u, ~0u, ~0u };

	if (words) {
		const uint64_t *a = (const uint64_t *)(const void *)p;
		const uint64_t *b = (const uint64_t *)(const void *)(p + lane);
		const uint64_t *c = (const uint64_t *)(const void *)(p + 2 * lane);

		if (hw)
			hw_lanes(a, b, c, words, crc);
		else
			sw_lanes(a, b, c, words, crc);
	}
	/* the last n % 24 bytes go on the first lane's chain */
	crc[0] = sw_bytes(crc[0], p + done, n - done);
	return (((uint64_t)~crc[0] << 32) | (uint32_t)~crc[1]) ^
	       ((uint64_t)~crc[2] * 0x9e3779b97f4a7c15ull) ^ (uint64_t)n;
}

uint64_t gs_csum(const void *buf, size_t n)
{
	return csum(buf, n, have_hw());
}

uint64_t gs_csum_table(const void *buf, size_t n)
{
	return csum(buf, n, false);
}
