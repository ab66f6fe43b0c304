/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What the test doubles of the vendor drivers (fake_cuda, fake_ze,
 * fake_hsa) share: a failure injected into one entry point through the
 * environment, and the device count the environment asks for.
 */
#ifndef FI_XPU_TEST_FAKE_DRIVER_H
#define FI_XPU_TEST_FAKE_DRIVER_H

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The status that `var` (`<entry point>:<status>`, the status in `base`)
 * injects into entry point `fn`; 0 (success, for every driver) when none. */
static long fake_injected(const char *var, const char *fn, int base)
{
	const char *f = getenv(var);
	size_t n = strlen(fn);
	if (f && strncmp(f, fn, n) == 0 && f[n] == ':')
		return (long)strtoul(f + n + 1, NULL, base);
	return 0;
}

/* The device count that `var` asks for: 1 without it, `max` at most. */
static int fake_count(const char *var, int max)
{
	const char *v = getenv(var);
	int n = v ? atoi(v) : 1;
	return n > max ? max : n;
}

/* The start of an entry point: returns the status injected into `name`
 * (through the driver's `injected`), or `uninit` before initialisation. */
#define FAKE_ENTER(status_t, name, uninit)              \
	do {                                            \
		status_t inj_ = injected(name);         \
		if (inj_ != 0)                          \
			return inj_;                    \
		if (!initialised)                       \
			return (uninit);                \
	} while (0)

#endif
