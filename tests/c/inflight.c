/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Operations in flight when the kernel that posted them exits, and the
 * abort word, on any provider (OFI_COMMON_PROV names it, ofi by default).
 *
 *   inflight agent     two processes; each launches a kernel that posts a
 *                      16 MiB streamed send (unregistered source) and a
 *                      16 MiB rendezvous send (registered source, desc) to
 *                      the other, posts the two receives, and exits. With
 *                      a host progress agent (FI_XPU_DOMAIN_HOST_PROGRESS)
 *                      the bytes arrive while no kernel runs: the host
 *                      watches the receive buffers; then a second kernel
 *                      finds the four completions waiting, without errors.
 *   inflight resume    the same without an agent (shm): nothing moves
 *                      while no kernel runs; the operations stay posted
 *                      and finish once a later kernel drives the endpoint
 *                      (reads its CQ).
 *   inflight abort     one process: work items wait on a CQ, on a counter
 *                      (work item and work group scope) and on a signal
 *                      word with 60 s limits; the host raises the abort word and every
 *                      wait ends with -FI_ECANCELED; lowered again, waits
 *                      time out and complete as before.
 */
#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ofi_common.h"

#define MSG (16u << 20)
#define TAG_STREAM 1
#define TAG_RDV 2

static unsigned char pat(int rank, uint64_t tag, size_t i)
{
	return (unsigned char)(rank * 97 + tag * 31 + i * 7 + (i >> 12) + 1);
}

struct post_args {
	struct ofi_node *n;
	int rc;
};

/* The first kernel: posts two receives and two sends, then exits. */
static void post_kernel(void *arg)
{
	struct post_args *a = (struct post_args *)arg;
	struct ofi_node *n = a->n;
	int64_t r;
	a->rc = 0;
	r = fi_xpu_trecv(&n->ep[0], n->heap + MSG, MSG, NULL, NULL, TAG_STREAM, 0, NULL, 0,
			 FI_XPU_WORK_ITEM);
	if (!r)
		r = fi_xpu_trecv(&n->ep[0], n->heap + 2 * (size_t)MSG, MSG, NULL, NULL, TAG_RDV, 0,
				 NULL, 0, FI_XPU_WORK_ITEM);
	if (!r)
		r = fi_xpu_tsend(&n->ep[0], n->local, MSG, NULL, 0, &n->raw[0], TAG_STREAM, NULL, 0,
				 FI_XPU_WORK_ITEM);
	if (!r)
		r = fi_xpu_tsend(&n->ep[0], n->heap, MSG, n->desc, 0, &n->raw[0], TAG_RDV, NULL, 0,
				 FI_XPU_WORK_ITEM);
	a->rc = (int)r;
}

/* The second kernel: the four completions, in any order. */
static void reap_kernel(void *arg)
{
	struct post_args *a = (struct post_args *)arg;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = { 0 };
	int got = 0, sends = 0, recvs = 0;
	a->rc = 0;
	while (got < 4) {
		int64_t k = fi_xpu_cq_sread(&a->n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM);
		if (k == -FI_EAVAIL) {
			fi_xpu_cq_readerr(&a->n->cq[0], &err, 0, FI_XPU_WORK_ITEM);
			fprintf(stderr, "[%d] error completion %d\n", (int)getpid(), err.err);
			a->rc = -err.err;
			return;
		}
		if (k != 1) {
			fprintf(stderr, "[%d] fi_xpu_cq_sread = %" PRId64 " after %d\n",
				(int)getpid(), k, got);
			a->rc = (int)k;
			return;
		}
		if (e.flags & FI_SEND)
			sends++;
		if (e.flags & FI_RECV) {
			recvs++;
			if (e.len != MSG) {
				a->rc = -FI_EIO;
				return;
			}
		}
		got++;
	}
	if (sends != 2 || recvs != 2)
		a->rc = -FI_EIO;
}

static void launch(void (*k)(void *), struct post_args *a)
{
	struct fi_xpu_host_launch_attr la = { .num_groups = 1, .group_size = 1 };
	CHECK(fi_xpu_host_launch(&la, k, a));
	CHECK(a->rc);
}

static int arrived(struct ofi_node *n, int peer)
{
	size_t i;
	for (i = 0; i < MSG; i++)
		if (n->heap[MSG + i] != pat(peer, TAG_STREAM, i) ||
		    n->heap[2 * (size_t)MSG + i] != pat(peer, TAG_RDV, i))
			return 0;
	return 1;
}

/* Whether a host progress agent runs ("agent"; "resume": none). */
static int agent;

static int run_pair(int sock, int rank)
{
	struct ofi_opts o = { .heap = 3 * (size_t)MSG, .local = MSG, .cq_size = 64,
			      .cq_timeout_ms = 60000,
			      .dflags = agent ? FI_XPU_DOMAIN_HOST_PROGRESS : 0 };
	struct ofi_node n;
	struct post_args a;
	size_t i;
	uint64_t t0;
	int peer = 1 - rank;

	ofi_setup(&n, sock, rank, &o);
	for (i = 0; i < MSG; i++) {
		n.local[i] = pat(rank, TAG_STREAM, i);
		n.heap[i] = pat(rank, TAG_RDV, i);
	}
	ofi_barrier(&n);
	a.n = &n;
	launch(post_kernel, &a);
	/* No kernel runs from here on. */
	if (agent) {
		t0 = ofi_now_ms();
		while (!arrived(&n, peer)) {
			if (ofi_now_ms() - t0 > 60000) {
				fprintf(stderr, "[%d] the messages never arrived without a kernel\n",
					(int)getpid());
				exit(1);
			}
			usleep(2000);
		}
	} else {
		usleep(300000);
		/* Only the first lane of the streamed message can have landed,
		 * and only if the receive was posted first: never all of it. */
		EXPECT(!arrived(&n, peer));
	}
	ofi_barrier(&n);
	launch(reap_kernel, &a);
	EXPECT(arrived(&n, peer));
	ofi_barrier(&n);
	ofi_teardown(&n);
	return 0;
}

/* ---- abort --------------------------------------------------------------- */
struct wait_args {
	struct ofi_node *n;
	int rc[8];
};

static void wait_kernel(void *arg)
{
	struct wait_args *w = (struct wait_args *)arg;
	const struct fi_xpu_host_item *it = fi_xpu_host_item();
	struct fi_cq_tagged_entry e;
	uint32_t g = it->group_id, l = it->local_id;
	if (g == 0) {
		/* A CQ wait and a counter wait, each by one work item. */
		if (l == 0)
			w->rc[0] = (int)fi_xpu_cq_sread(&w->n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM);
		else if (l == 1)
			w->rc[1] = fi_xpu_cntr_wait_status(&w->n->cntr, 1ULL << 60, 60000,
							   FI_XPU_WORK_ITEM);
		else if (l == 2)
			/* A signal word nobody writes. */
			w->rc[6] = fi_xpu_signal_wait_until(&w->n->ep[0],
							    (const uint64_t *)(void *)(w->n->local + 512),
							    FI_XPU_CMP_NE, 0, 60000,
							    FI_XPU_WORK_ITEM);
	} else {
		/* A work group waits on the counter together. */
		int r = fi_xpu_cntr_wait_status(&w->n->cntr, 1ULL << 60, 60000,
						FI_XPU_WORK_GROUP);
		w->rc[2 + l] = r;
	}
}

static void *raise_abort(void *arg)
{
	struct ofi_node *n = (struct ofi_node *)arg;
	usleep(200000);
	CHECK(fi_xpu_ctx_abort(n->ctx, 0));
	return NULL;
}

static int run_abort(void)
{
	struct ofi_opts o = { .cq_timeout_ms = 60000 };
	struct fi_xpu_host_launch_attr la = { .num_groups = 2, .group_size = 4 };
	struct ofi_node n;
	struct wait_args w;
	struct fi_cq_tagged_entry e;
	pthread_t t;
	int i;

	ofi_setup(&n, -1, 0, &o);
	EXPECT_EQ(fi_xpu_ctx_abort(NULL, 0), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_ctx_abort(n.ctx, 1ULL << 5), -FI_EBADFLAGS);
	memset(&w, 0, sizeof(w));
	w.n = &n;
	if (pthread_create(&t, NULL, raise_abort, &n) != 0)
		return 1;
	CHECK(fi_xpu_host_launch(&la, wait_kernel, &w));
	pthread_join(t, NULL);
	EXPECT_EQ(w.rc[0], -FI_ECANCELED);
	EXPECT_EQ(w.rc[1], -FI_ECANCELED);
	for (i = 2; i < 7; i++)
		EXPECT_EQ(w.rc[i], -FI_ECANCELED);
	EXPECT_EQ(fi_xpu_wait_aborted(&n.ep[0]), -FI_ECANCELED);
	/* Raised, a wait that could finish at once still finishes: the
	 * counter is checked before the abort word. */
	EXPECT_EQ(fi_xpu_cntr_wait_status(&n.cntr, 0, 60000, FI_XPU_WORK_ITEM), 0);
	/* Lowered, waits time out and complete again. */
	CHECK(fi_xpu_ctx_abort(n.ctx, FI_XPU_ABORT_CLEAR));
	EXPECT_EQ(fi_xpu_cntr_wait_status(&n.cntr, 1ULL << 60, 10, FI_XPU_WORK_ITEM),
		  -FI_ETIMEDOUT);
	EXPECT_EQ(fi_xpu_wait_aborted(&n.ep[0]), 0);
	EXPECT_EQ(fi_xpu_signal_wait_until(&n.ep[0], (const uint64_t *)(void *)(n.local + 512),
					   FI_XPU_CMP_NE, 0, 10, FI_XPU_WORK_ITEM),
		  -FI_ETIMEDOUT);
	CHECK(fi_xpu_tsend(&n.ep[0], n.local, 8, NULL, 0, &n.raw[0], 9, NULL, 0, FI_XPU_WORK_ITEM));
	CHECK(fi_xpu_trecv(&n.ep[0], n.local + 64, 8, NULL, NULL, 9, 0, NULL, 0,
			   FI_XPU_WORK_ITEM));
	EXPECT_EQ(fi_xpu_cq_sread(&n.cq[0], &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	EXPECT_EQ(fi_xpu_cq_sread(&n.cq[0], &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	ofi_teardown(&n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	if (strcmp(argv[1], "abort") == 0) {
		if (run_abort() != 0)
			return 1;
		printf("inflight abort: ok\n");
		return 0;
	}
	agent = strcmp(argv[1], "agent") == 0;
	if (!agent && strcmp(argv[1], "resume") != 0)
		return 2;
	return ofi_pair_main("inflight", argv[1], run_pair);
}
