/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What the examples of two processes share (hello.c, pingpong.c and the
 * CUDA ones): CHECK, which ends the process on a failed fi_xpu call; the
 * provider FI_XPU_PROVIDER selects; and the swap of what the two tell
 * each other over their socketpair.
 */
#ifndef FI_XPU_EXAMPLE_H
#define FI_XPU_EXAMPLE_H

#include <fi_xpu.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(expr)                                                                  \
	do {                                                                         \
		int rc_ = (int)(expr);                                               \
		if (rc_ < 0) {                                                       \
			fprintf(stderr, "[%d] %s:%d: %s failed: %s\n", (int)getpid(), \
				__FILE__, __LINE__, #expr, fi_xpu_strerror(rc_));    \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

/* The name of the provider FI_XPU_PROVIDER selects (e.g. "ofi"), by
 * default shm. */
static inline const char *example_provider_name(void)
{
	const char *want = getenv("FI_XPU_PROVIDER");
	if (!want || !*want || strchr(want, ',') || want[0] == '^')
		want = "shm";
	return want;
}

/* That provider's entry in `info`; ends the process when it has none. */
static inline struct fi_xpu_info *example_provider(struct fi_xpu_info *info)
{
	const char *want = example_provider_name();
	struct fi_xpu_info *i;
	for (i = info; i && strcmp(i->prov_name, want) != 0; i = i->next)
		;
	if (!i) {
		fprintf(stderr, "the %s provider is not available\n", want);
		exit(1);
	}
	return i;
}

/* Sends `len` bytes of `out` to the other process and reads as many
 * into `in`. */
static inline void xfer(int sock, const void *out, void *in, size_t len)
{
	if (write(sock, out, len) != (ssize_t)len || read(sock, in, len) != (ssize_t)len) {
		perror("socketpair");
		exit(1);
	}
}

#endif
