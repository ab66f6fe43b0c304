/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * pingpong: message latency and rate between two processes through the shm
 * provider, device code running on host threads (iface FI_HMEM_SYSTEM). The
 * parent forks its peer and swaps addresses over a socketpair. Prints a
 * table in the style of libfabric's fi_pingpong.
 *
 *   ./pingpong [-n iterations] [-S max_size]
 */
/* clock_gettime and getopt under a strict -std=c11. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "example.h"

#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct card {
	uint8_t name[64];
};

struct peer {
	struct example_objs o;
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
	unsigned char *tx, *rx;
	unsigned char desc[32];
	uint64_t raw;
};

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Waits for `n` completions (send and receive ones alike). */
static void drain(struct peer *p, int n)
{
	struct fi_cq_entry e[8];
	while (n > 0) {
		int64_t got = fi_xpu_cq_read(&p->cq, e, n < 8 ? (size_t)n : 8, FI_XPU_WORK_ITEM);
		if (got > 0)
			n -= (int)got;
		else if (got != -FI_EAGAIN) {
			fprintf(stderr, "cq read: %s\n", fi_xpu_strerror((int)got));
			exit(1);
		}
	}
}

static void setup(struct peer *p, int sock, size_t max)
{
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	struct fi_xpu_cq_attr cattr = { .size = 256, .flags = 0, .format = FI_CQ_FORMAT_CONTEXT,
					.timeout = -1, .xpu_ctx = NULL };
	struct card mine, peer;
	size_t len = sizeof(mine.name);
	fi_addr_t fa;
	int fd;
	uint64_t off;

	example_open(&p->o, &xattr, NULL, &cattr, mine.name, &len);
	/* Messages larger than an inbox slot are pulled by the receiver from
	 * the sender's registered memory, so both buffers are registered. */
	CHECK(fi_xpu_alloc(p->o.ctx, 2 * max, 0, FI_XPU_ALLOC_DMABUF, (void **)&p->tx, &fd,
			   &off));
	close(fd);
	p->rx = p->tx + max;
	memset(p->tx, 0xab, 2 * max);
	CHECK(fi_xpu_mr_reg(p->o.dom, p->o.ctx, p->tx, 2 * max, FI_SEND | FI_RECV, 0, 0, 0,
			    &p->o.mr, NULL));
	len = sizeof(p->desc);
	CHECK(fi_xpu_mr_desc(p->o.mr, p->desc, &len, 0, p->o.ctx));
	xfer(sock, &mine, &peer, sizeof(mine));
	CHECK(fi_xpu_av_insert(p->o.av, peer.name, 1, &fa, 0, NULL));
	len = sizeof(p->raw);
	CHECK(fi_xpu_av_lookup(p->o.av, fa, &p->raw, &len, 0, p->o.ctx));
	CHECK(fi_xpu_export(&p->o.hep->fid, 0, &p->ep.fid));
	CHECK(fi_xpu_export(&p->o.hcq->fid, 0, &p->cq.fid));
}

/* One round trip: the client sends first, the server echoes. */
static void exchange(struct peer *p, size_t size, int client)
{
	int rc;
	CHECK(fi_xpu_recv(&p->ep, p->rx, size, NULL, NULL, NULL, 0, FI_XPU_WORK_ITEM));
	if (!client)
		drain(p, 1);
	do
		rc = fi_xpu_send(&p->ep, p->tx, size, p->desc, 0, &p->raw, NULL, 0,
				 FI_XPU_WORK_ITEM);
	while (rc == -FI_EAGAIN);
	CHECK(rc);
	drain(p, client ? 2 : 1);
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1, 8, 64, 512, 4096, 65536, 1 << 20 };
	int iters = 2000, opt, sv[2], status = 0, client;
	size_t max = 1 << 20, k;
	struct peer p;
	pid_t child;

	while ((opt = getopt(argc, argv, "n:S:")) != -1) {
		if (opt == 'n')
			iters = atoi(optarg);
		else if (opt == 'S')
			max = (size_t)strtoull(optarg, NULL, 0);
		else {
			fprintf(stderr, "usage: %s [-n iterations] [-S max_size]\n", argv[0]);
			return 2;
		}
	}
	if (iters < 1 || max < 1)
		return 2;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	fflush(stdout);
	child = fork();
	if (child < 0)
		return 1;
	client = child != 0;
	close(sv[client ? 1 : 0]);
	memset(&p, 0, sizeof(p));
	setup(&p, sv[client ? 0 : 1], max);
	if (client)
		printf("%-10s %-8s %-8s %-10s %10s %10s %10s\n", "bytes", "iters", "total",
		       "time", "MB/sec", "usec/xfer", "Mxfers/sec");
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && sizes[k] <= max; k++) {
		size_t size = sizes[k];
		int n = size >= 65536 ? (iters / 10 > 0 ? iters / 10 : 1) : iters, i;
		double t0, us;
		char sync = 0;
		for (i = 0; i < 10; i++)
			exchange(&p, size, client);
		t0 = now_us();
		for (i = 0; i < n; i++)
			exchange(&p, size, client);
		us = now_us() - t0;
		if (client) {
			double bytes = 2.0 * (double)n * (double)size;
			char t[32];
			snprintf(t, sizeof(t), "%.4fs", us / 1e6);
			printf("%-10zu %-8d %-8.3g %-10s %10.2f %10.2f %10.2f\n", size, n, bytes, t,
			       bytes / us, us / n / 2, n * 2 / us);
			fflush(stdout);
		}
		/* Keep both sides in step between sizes. */
		if (write(sv[client ? 0 : 1], &sync, 1) != 1 ||
		    read(sv[client ? 0 : 1], &sync, 1) != 1)
			return 1;
	}
	example_close(&p.o, p.tx);
	if (!client)
		return 0;
	waitpid(child, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
