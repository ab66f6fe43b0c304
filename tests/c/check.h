/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * CHECK(c) for the standalone C test programs: prints the file, line and
 * condition that failed and exits with status 1.
 */
#ifndef FI_XPU_TEST_CHECK_H
#define FI_XPU_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                              \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
			exit(1);                                              \
		}                                                             \
	} while (0)

#endif
