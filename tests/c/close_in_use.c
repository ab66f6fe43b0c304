/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Closing a host CQ or counter while other threads are inside
 * fi_xpu_cq_host_read / fi_xpu_cntr_host_read on it. A close waits for the
 * host calls already in flight on the object and then closes it; calls that
 * start after the close began see a closed handle (-FI_EINVAL). Nothing may
 * touch freed memory: the suite runs this under AddressSanitizer and
 * valgrind, and the test provider aborts if it is asked to close an object
 * while one of its calls is still inside it.
 *
 * usage: close_in_use <provider-name> [rounds]
 * Prints "close_in_use: ok" and exits 0 when every check holds.
 */
#include <fi_xpu.h>

#define EXPECT_THREADS
#include "expect.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READERS 4

/* The objects the readers hammer; swapped by the main thread each round. */
static _Atomic(struct fid_xpu_host_cq *) shared_cq;
static _Atomic(struct fid_xpu_host_cntr *) shared_cntr;
static atomic_int stop;
static atomic_long calls, closed_seen;

static void *reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		struct fi_cq_entry entry;
		struct fid_xpu_host_cq *cq = atomic_load(&shared_cq);
		ssize_t n = fi_xpu_cq_host_read(cq, &entry, 1);
		if (n == -FI_EINVAL)
			atomic_fetch_add(&closed_seen, 1);
		else
			EXPECT(n, -FI_EAGAIN);

		struct fid_xpu_host_cntr *cntr = atomic_load(&shared_cntr);
		uint64_t value = 0;
		int ret = fi_xpu_cntr_host_read(cntr, &value);
		if (ret == -FI_EINVAL)
			atomic_fetch_add(&closed_seen, 1);
		else
			EXPECT(ret, 0);
		atomic_fetch_add(&calls, 2);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "test";
	int rounds = argc > 2 ? atoi(argv[2]) : 20;
	struct fi_xpu_info hints, *info = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.prov_name = (char *)prov;
	uint32_t version = FI_XPU_VERSION(FI_XPU_MAJOR_VERSION, FI_XPU_MINOR_VERSION);
	if (fi_xpu_getinfo(version, &hints, 0, &info) != 0) {
		fprintf(stderr, "provider %s not found\n", prov);
		return 1;
	}
	struct fid_xpu_domain *dom = NULL;
	if (fi_xpu_domain(info, NULL, &dom, NULL) != 0) {
		fprintf(stderr, "cannot open a domain\n");
		return 1;
	}

	struct fi_xpu_cq_attr cq_attr = { .size = 64, .format = FI_CQ_FORMAT_CONTEXT };
	struct fi_xpu_cntr_attr cntr_attr = { .flags = 0 };
	struct fid_xpu_host_cq *cq = NULL;
	struct fid_xpu_host_cntr *cntr = NULL;
	EXPECT(fi_xpu_cq_open(dom, &cq_attr, &cq, NULL), 0);
	EXPECT(fi_xpu_cntr_open(dom, &cntr_attr, &cntr, NULL), 0);
	atomic_store(&shared_cq, cq);
	atomic_store(&shared_cntr, cntr);

	pthread_t threads[READERS];
	for (int i = 0; i < READERS; i++)
		pthread_create(&threads[i], NULL, reader, NULL);

	for (int r = 0; r < rounds; r++) {
		usleep(2000);
		/* Close under the readers' feet, then hand them fresh objects. */
		EXPECT(fi_xpu_close(&cq->fid), 0);
		EXPECT(fi_xpu_close(&cntr->fid), 0);
		usleep(500);
		EXPECT(fi_xpu_cq_open(dom, &cq_attr, &cq, NULL), 0);
		EXPECT(fi_xpu_cntr_open(dom, &cntr_attr, &cntr, NULL), 0);
		atomic_store(&shared_cq, cq);
		atomic_store(&shared_cntr, cntr);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < READERS; i++)
		pthread_join(threads[i], NULL);

	EXPECT(fi_xpu_close(&cq->fid), 0);
	EXPECT(fi_xpu_close(&cntr->fid), 0);
	EXPECT(fi_xpu_close(&dom->fid), 0);
	fi_xpu_freeinfo(info);

	if (atomic_load(&calls) == 0 || atomic_load(&closed_seen) == 0) {
		fprintf(stderr, "the readers never raced a close (%ld calls, %ld closed)\n",
			atomic_load(&calls), atomic_load(&closed_seen));
		return 1;
	}
	return expect_report("close_in_use: ok");
}
