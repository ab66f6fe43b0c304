/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What every benchmark program uses: DIE (a message and exit status 2)
 * and a monotonic clock in seconds.
 */
#ifndef FI_XPU_BENCH_BENCH_H
#define FI_XPU_BENCH_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(2); } while (0)

static inline double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
