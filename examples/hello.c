/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * hello: two processes on one node talk through the shm provider with the
 * host CPU standing in for the device (iface FI_HMEM_SYSTEM). The parent
 * forks its peer and swaps addresses over a socketpair, so one command runs
 * it. The "device" code below is what a GPU kernel would run: an RMA write
 * with remote CQ data, an atomic add, and a send matched by a posted receive.
 *
 *   cc -I . -I include examples/hello.c -L target/debug -lfi_xpu -o hello && ./hello
 */
#include "example.h"

#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEAP 4096

/* What each side tells the other, besides its endpoint address. */
struct card {
	uint8_t name[64];
	uint64_t base;
	uint64_t key;
};

/* Waits for one CQ entry (host XPU: this thread is the device). */
static struct fi_cq_data_entry wait_one(struct fid_xpu_cq *cq)
{
	struct fi_cq_data_entry e;
	int64_t n = fi_xpu_cq_sread(cq, &e, 1, 1, FI_XPU_WORK_ITEM);
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };
		fi_xpu_cq_readerr(cq, &err, 0, FI_XPU_WORK_ITEM);
		fprintf(stderr, "[%d] error completion: %s\n", (int)getpid(),
			fi_xpu_strerror(-err.err));
		exit(1);
	}
	CHECK(n);
	return e;
}

static int run(int sock, int rank)
{
	struct example_objs o;
	struct fid_xpu_cq cq;
	struct fid_xpu_ep ep;
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	struct fi_xpu_av_attr aattr = { .count = 2, .flags = 0 };
	struct fi_xpu_cq_attr cattr = { .size = 64, .flags = 0, .format = FI_CQ_FORMAT_DATA,
					.timeout = 5000, .xpu_ctx = NULL };
	struct card mine = { 0 }, peer;
	size_t len = sizeof(mine.name);
	fi_addr_t fa;
	uint64_t raw;
	char *heap;
	int fd;
	uint64_t off;

	example_open(&o, &xattr, &aattr, &cattr, mine.name, &len);

	/* Peers may touch only registered memory of the context (a symmetric
	 * heap, allocated exportable). */
	CHECK(fi_xpu_alloc(o.ctx, HEAP, 0, FI_XPU_ALLOC_DMABUF, (void **)&heap, &fd, &off));
	close(fd);
	memset(heap, 0, HEAP);
	CHECK(fi_xpu_mr_reg(o.dom, o.ctx, heap, HEAP, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0,
			    &o.mr, NULL));
	CHECK(fi_xpu_mr_key(o.mr, &mine.key));
	mine.base = (uint64_t)(uintptr_t)heap;

	xfer(sock, &mine, &peer, sizeof(mine));
	CHECK(fi_xpu_av_insert(o.av, peer.name, 1, &fa, 0, NULL));
	len = sizeof(raw);
	CHECK(fi_xpu_av_lookup(o.av, fa, &raw, &len, 0, o.ctx));
	CHECK(fi_xpu_export(&o.hep->fid, 0, &ep.fid));
	CHECK(fi_xpu_export(&o.hcq->fid, 0, &cq.fid));

	if (rank == 0) {
		char msg[64];
		uint64_t one = 1;
		char ready;
		int n = snprintf(msg, sizeof(msg), "hello from pid %d", (int)getpid());
		/* Device code: write into the peer's heap, announce it with CQ data,
		 * bump a counter word atomically, then send a message. */
		/* `msg` and `one` live on the stack, which no provider has to be
		 * able to reach later: FI_INJECT copies them during the call
		 * (up to the inject size, 64 bytes or more), so they may change
		 * as soon as it returns. */
		CHECK(fi_xpu_write(&ep, msg, (size_t)n + 1, NULL, 0x2a, &raw, peer.base, peer.key,
				   NULL, FI_REMOTE_CQ_DATA | FI_INJECT, FI_XPU_WORK_ITEM));
		wait_one(&cq);
		CHECK(fi_xpu_atomic(&ep, &one, 1, NULL, &raw, peer.base + 256, peer.key, FI_UINT64,
				    FI_SUM, NULL, FI_INJECT, FI_XPU_WORK_ITEM));
		wait_one(&cq);
		if (read(sock, &ready, 1) != 1)
			exit(1);
		n = snprintf(msg, sizeof(msg), "a message from pid %d", (int)getpid());
		CHECK(fi_xpu_send(&ep, msg, (size_t)n + 1, NULL, 0, &raw, NULL, FI_INJECT,
				  FI_XPU_WORK_ITEM));
		wait_one(&cq);
		if (read(sock, &ready, 1) != 1)
			exit(1);
	} else {
		/* A receive buffer must be memory the context knows (allocated,
		 * imported or registered): the part of the heap nobody writes. */
		char *box = (char *)heap + 512;
		struct fi_cq_data_entry e;
		uint64_t src = 0;
		int64_t n;
		CHECK(fi_xpu_recv(&ep, box, 64, NULL, NULL, box, 0, FI_XPU_WORK_ITEM));
		e = wait_one(&cq);
		printf("[%d] remote write arrived (cq data 0x%" PRIx64 ", %zu bytes): \"%s\"\n",
		       (int)getpid(), e.data, e.len, heap);
		if (write(sock, "r", 1) != 1)
			exit(1);
		do
			n = fi_xpu_cq_sreadfrom(&cq, &e, 1, &src, 1, FI_XPU_WORK_ITEM);
		while (n == -FI_EAGAIN);
		CHECK(n);
		printf("[%d] atomic counter in my heap: %" PRIu64 "\n", (int)getpid(),
		       *(volatile uint64_t *)(heap + 256));
		printf("[%d] received from fi_addr %" PRIu64 " (%zu bytes): \"%s\"\n",
		       (int)getpid(), src, e.len, box);
		if (write(sock, "d", 1) != 1)
			exit(1);
	}

	example_close(&o, heap);
	return 0;
}

int main(void)
{
	int sv[2], status = 0;
	pid_t child;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
		perror("socketpair");
		return 1;
	}
	fflush(stdout);
	child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		close(sv[0]);
		return run(sv[1], 1);
	}
	close(sv[1]);
	run(sv[0], 0);
	waitpid(child, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "peer failed\n");
		return 1;
	}
	printf("hello: ok\n");
	return 0;
}
