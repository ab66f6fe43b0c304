/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * two_process: the whole flow of fi_xpu between two processes, in one
 * file (the EXAMPLE of fi_xpu(7)). Each process opens a domain, an XPU
 * context, an address vector, a CQ and an endpoint; allocates memory
 * peers may write and registers it; the two swap endpoint names, heap
 * addresses and keys over a socketpair. Then the device side (here this
 * thread, the host XPU) of process 0 writes a message into process 1's
 * heap with CQ data, and process 1's device side reads the completion.
 *
 *   cc two_process.c $(pkg-config --cflags --libs fi_xpu) && ./a.out
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(call)                                                             \
	do {                                                                    \
		long long rc_ = (long long)(call);                              \
		if (rc_ < 0) {                                                  \
			fprintf(stderr, "%s: %s\n", #call, fi_xpu_strerror((int)rc_)); \
			exit(1);                                                \
		}                                                               \
	} while (0)

/* What each process tells the other. */
struct card {
	uint8_t name[64]; /* endpoint name (fi_xpu_getname) */
	uint64_t base;    /* heap address, the peer's RMA address */
	uint64_t key;     /* heap registration key */
};

static int run(int sock, int rank)
{
	struct fi_xpu_info *info;
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_mr *mr;
	struct fid_xpu_ep ep; /* device handles, filled by fi_xpu_export */
	struct fid_xpu_cq cq;
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	struct fi_xpu_av_attr aattr = { .count = 2, .flags = 0 };
	struct fi_xpu_cq_attr cattr = { .size = 16, .flags = 0, .format = FI_CQ_FORMAT_DATA,
					.timeout = 5000, .xpu_ctx = NULL };
	struct fi_xpu_ep_attr eattr = { 0 };
	struct fi_cq_data_entry e;
	struct card mine = { 0 }, peer;
	size_t len = sizeof(mine.name);
	fi_addr_t fa;
	uint64_t dest, off;
	char *heap;
	int fd;

	/* Host: the objects (the first provider is the default, shm). */
	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info));
	CHECK(fi_xpu_domain(info, NULL, &dom, NULL));
	fi_xpu_freeinfo(info);
	CHECK(fi_xpu_ctx_open(dom, &xattr, &ctx, NULL));
	CHECK(fi_xpu_av_open(dom, &aattr, &av, NULL));
	cattr.xpu_ctx = ctx;
	CHECK(fi_xpu_cq_open(dom, &cattr, &hcq, NULL));
	eattr.xpu_ctx = ctx;
	CHECK(fi_xpu_endpoint(dom, &eattr, &hep, NULL));
	CHECK(fi_xpu_ep_bind(hep, &av->fid, 0));
	CHECK(fi_xpu_ep_bind(hep, &hcq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_enable(hep));
	CHECK(fi_xpu_getname(hep, mine.name, &len));

	/* Memory peers may write: allocated by the context, registered. */
	CHECK(fi_xpu_alloc(ctx, 4096, 0, FI_XPU_ALLOC_DMABUF, (void **)&heap, &fd, &off));
	close(fd);
	memset(heap, 0, 4096);
	CHECK(fi_xpu_mr_reg(dom, ctx, heap, 4096, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL));
	CHECK(fi_xpu_mr_key(mr, &mine.key));
	mine.base = (uint64_t)(uintptr_t)heap;

	/* Out of band: swap cards, then the peer's address as the device
	 * names it (fi_xpu_av_lookup), and the device handles. */
	if (write(sock, &mine, sizeof(mine)) != sizeof(mine) ||
	    read(sock, &peer, sizeof(peer)) != sizeof(peer))
		exit(1);
	CHECK(fi_xpu_av_insert(av, peer.name, 1, &fa, 0, NULL));
	len = sizeof(dest);
	CHECK(fi_xpu_av_lookup(av, fa, &dest, &len, 0, ctx));
	CHECK(fi_xpu_export(&hep->fid, 0, &ep.fid));
	CHECK(fi_xpu_export(&hcq->fid, 0, &cq.fid));

	/* Device: what a kernel does, here on this thread (the host XPU). */
	if (rank == 0) {
		char msg[32];
		int n = snprintf(msg, sizeof(msg), "hello from pid %d", (int)getpid());
		CHECK(fi_xpu_write(&ep, msg, (size_t)n + 1, NULL, 0x2a, &dest, peer.base, peer.key,
				   NULL, FI_REMOTE_CQ_DATA | FI_INJECT, FI_XPU_WORK_ITEM));
		CHECK(fi_xpu_cq_sread(&cq, &e, 1, 5000, FI_XPU_WORK_ITEM));
	} else {
		CHECK(fi_xpu_cq_sread(&cq, &e, 1, 5000, FI_XPU_WORK_ITEM));
		printf("process 1: cq data 0x%" PRIx64 ", \"%s\"\n", e.data, heap);
	}
	/* Neither leaves before the other is done with its memory. */
	if (write(sock, "x", 1) != 1 || read(sock, &peer, 1) != 1)
		exit(1);

	CHECK(fi_xpu_close(&mr->fid));
	CHECK(fi_xpu_free(ctx, heap));
	CHECK(fi_xpu_close(&hep->fid));
	CHECK(fi_xpu_close(&hcq->fid));
	CHECK(fi_xpu_close(&av->fid));
	CHECK(fi_xpu_close(&ctx->fid));
	CHECK(fi_xpu_close(&dom->fid));
	return 0;
}

int main(void)
{
	int sv[2], status = 1;
	pid_t child;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	fflush(stdout);
	child = fork();
	if (child == 0) {
		close(sv[0]);
		return run(sv[1], 1);
	}
	close(sv[1]);
	run(sv[0], 0);
	if (child < 0 || waitpid(child, &status, 0) != child || status != 0)
		return 1;
	printf("two_process: ok\n");
	return 0;
}
