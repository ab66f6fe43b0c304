/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * EXPECT(expr, want) and REQUIRE(expr, want) for the single-process C
 * tests: a mismatch prints the file, line, expression and both values
 * (with their libfabric error names) and counts one failure in `failures`;
 * REQUIRE exits with status 1 as well, for what the rest depends on. A
 * test whose threads call EXPECT defines EXPECT_THREADS before including
 * this, and `failures` is an atomic counter. A header with an EXPECT of
 * its own (and its own `failures`) defines it first and takes REQUIRE.
 * expect_report ends main with the count of failures or the success line.
 */
#ifndef FI_XPU_TEST_EXPECT_H
#define FI_XPU_TEST_EXPECT_H

#include <fi_xpu.h>

#include <stdio.h>
#include <stdlib.h>

#ifndef EXPECT
#ifdef EXPECT_THREADS
#include <stdatomic.h>
static atomic_int failures;
#else
static int failures;
#endif

#define EXPECT(expr, want)                                                                  \
	do {                                                                                \
		long long got_ = (long long)(expr);                                         \
		long long want_ = (long long)(want);                                        \
		if (got_ != want_) {                                                        \
			fprintf(stderr, "%s:%d: %s = %lld (%s), expected %lld (%s)\n",      \
				__FILE__, __LINE__, #expr, got_,                            \
				fi_xpu_strerror((int)got_), want_,                          \
				fi_xpu_strerror((int)want_));                               \
			failures++;                                                         \
		}                                                                           \
	} while (0)
#endif

/* The end of a test program: how many checks failed on stderr and 1, or
 * `ok` on stdout and 0. */
static inline int expect_report(const char *ok)
{
	int n = failures;
	if (n) {
		fprintf(stderr, "%d check(s) failed\n", n);
		return 1;
	}
	printf("%s\n", ok);
	return 0;
}

/* Fatal: what follows depends on it. */
#define REQUIRE(expr, want)                                                                 \
	do {                                                                                \
		int before_ = failures;                                                     \
		EXPECT(expr, want);                                                         \
		if (failures != before_)                                                    \
			exit(1);                                                            \
	} while (0)

#endif
