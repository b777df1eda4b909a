// SPDX-License-Identifier: GPL-2.0
/*
 * tests/host/cuda_decls_check.c: user/gs_cuda.h, gpusleep's own
 * declarations of the CUDA Driver API subset it calls, against the CUDA
 * toolkit's cuda.h (built and run by tests/host/test_cuda_decls.sh where
 * a toolkit is installed).
 *
 * At compile time: every value, size and member offset gs_cuda.h lists is
 * the one cuda.h has (gs_cuda.h asserts its own declarations against the
 * same lists), and every prototype it declares is compatible with
 * cuda.h's (a redeclaration the compiler would refuse otherwise). At run
 * time: the name each entry point is loaded by (exported, with its _v2)
 * is the one cuda.h maps its base name to. Prints TAP.
 */
#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define GS_CUDA_PROTOS_ONLY
#include "gs_cuda.h"

#define RESULT(name, value) \
	_Static_assert((long long)(name) == (value), #name " differs from cuda.h");
GS_CU_RESULTS(RESULT)
#define VALUE(e, name, value) \
	_Static_assert((long long)(name) == (value) && sizeof(e) == 4, \
		       #e " " #name " differs from cuda.h");
GS_CU_VALUES(VALUE)
GS_CU_DEFINES(RESULT)
#define SIZE(t, size) \
	_Static_assert(sizeof(t) == (size), "sizeof(" #t ") differs from cuda.h");
GS_CU_SIZES(SIZE)
#define MEMBER(t, m, off) \
	_Static_assert(offsetof(t, m) == (off), \
		       "offsetof(" #t ", " #m ") differs from cuda.h");
GS_CU_MEMBERS(MEMBER)

/* what cuda.h maps each base name to (its macro, expanded) */
#define STR_(x) #x
#define STR(x) STR_(x)
#define NAMES(base, exported) { #base, STR(base), #exported },
static const struct { const char *base, *cuda_h, *ours; } names[] = {
	GS_CU_ENTRY_POINTS(NAMES)
};

int main(void)
{
	int n = 0, fail = 0;

	printf("TAP version 13\n");
	printf("ok %d - values, sizes, member offsets and prototypes of gs_cuda.h are cuda.h's (CUDA_VERSION %d)\n",
	       ++n, CUDA_VERSION);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		bool ok = !strcmp(names[i].cuda_h, names[i].ours);

		fail |= !ok;
		printf("%sok %d - %s is exported as %s%s%s\n", ok ? "" : "not ",
		       ++n, names[i].base, names[i].ours,
		       ok ? "" : ": cuda.h says ", ok ? "" : names[i].cuda_h);
	}
	printf("1..%d\n", n);
	return fail;
}
