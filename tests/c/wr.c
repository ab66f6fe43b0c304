/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The work-request API on one provider (OFI_COMMON_PROV, see ofi_common.h):
 * two processes (fork + socketpair). The host prepares requests from
 * libfabric's struct fi_wr_attr (fi_xpu_prepare_wr, and fi_control with
 * FI_PREPARE_WORK); kernels on the host launcher modify them, queue them
 * at work-group scope (each member its own request) and flush. Rank 0
 * writes, sends and runs atomics on rank 1, which receives through a
 * prepared receive and checks what landed. Bad input gets its exact code,
 * on the host and on the device. Prints "wr: ok".
 */
#include "ofi_common.h"

#include <sys/socket.h>
#include <sys/wait.h>

#define WR FI_XPU_WR_SIZE
#define NW 8        /* writes queued by one work group */
#define MSG 64      /* bytes of the prepared send */
#define OFF_ATOM 512
#define OFF_MSG 1024
#define OFF_BAD 2048

struct kargs {
	struct fid_xpu_ep *ep;
	unsigned char *wrs; /* one prepared request per work item */
	unsigned char *src; /* 8 bytes per work item */
	uint64_t base;      /* the peer's heap */
	int bad;            /* work item whose request is not one (-1: none) */
	int queue_rc[NW];
	int flush_rc[NW];
	int set_rc[NW];
};

/* Every member modifies its own request (buffer, remote address, data)
 * and queues it; the group flushes once. */
static void queue_kernel(void *p)
{
	struct kargs *a = (struct kargs *)p;
	uint32_t i = fi_xpu_arch_local_id();
	void *wr = a->wrs + (size_t)i * WR;
	if ((int)i == a->bad) {
		a->set_rc[i] = fi_xpu_wr_set_buf(wr, a->src + 8 * i, 8);
	} else {
		a->set_rc[i] = fi_xpu_wr_set_buf(wr, a->src + 8 * i, 8) |
			       fi_xpu_wr_set_remote(wr, a->base + 8 * i) |
			       fi_xpu_wr_set_data(wr, i) | fi_xpu_wr_set_context(wr, NULL);
	}
	a->queue_rc[i] = fi_xpu_queue_wr(a->ep, wr, WR, FI_XPU_WORK_GROUP);
	a->flush_rc[i] = fi_xpu_flush_wr(a->ep, FI_XPU_WORK_GROUP);
}

/* Atomics: every member queues its own prepared FI_SUM. */
static void atomic_kernel(void *p)
{
	struct kargs *a = (struct kargs *)p;
	uint32_t i = fi_xpu_arch_local_id();
	a->queue_rc[i] = fi_xpu_queue_wr(a->ep, a->wrs + (size_t)i * WR, WR, FI_XPU_WORK_GROUP);
	a->flush_rc[i] = fi_xpu_flush_wr(a->ep, FI_XPU_WORK_GROUP);
}

static void launch(uint32_t items, void (*k)(void *), struct kargs *a)
{
	struct fi_xpu_host_launch_attr la = { .num_groups = 1, .group_size = items,
					      .subgroup_size = 0, .flags = 0 };
	CHECK(fi_xpu_host_launch(&la, k, a));
}

/* An RMA write of 8 bytes from `src` to the peer's heap at `off`. */
struct rma_desc {
	struct iovec iov;
	struct fi_rma_iov riov;
	void *desc;
	struct fi_op_rma op;
	struct fi_wr_attr work;
};

static void rma_write(struct ofi_node *n, struct rma_desc *d, void *src, uint64_t off, void *buf)
{
	memset(d, 0, sizeof(*d));
	d->iov.iov_base = src;
	d->iov.iov_len = 8;
	d->riov.addr = n->peer.base + off;
	d->riov.len = 8;
	d->riov.key = n->peer.key;
	d->op.ep = (struct fid_ep *)n->hep[0];
	d->op.msg.msg_iov = &d->iov;
	d->op.msg.desc = &d->desc;
	d->op.msg.iov_count = 1;
	d->op.msg.addr = 0; /* the peer, first in the AV */
	d->op.msg.rma_iov = &d->riov;
	d->op.msg.rma_iov_count = 1;
	d->work.op_type = FI_OP_WRITE;
	d->work.op.rma = &d->op;
	d->work.wr_buf = buf;
	d->work.wr_len = WR;
}

static uint64_t counter(struct ofi_node *n)
{
	return fi_xpu_cntr_read(&n->cntr, FI_XPU_WORK_ITEM);
}

static void wait_counter(struct ofi_node *n, uint64_t want)
{
	EXPECT_EQ(fi_xpu_cntr_wait_status(&n->cntr, want, 20000, FI_XPU_WORK_ITEM), 0);
	EXPECT_EQ(fi_xpu_cntr_readerr(&n->cntr, FI_XPU_WORK_ITEM), 0);
}

static void host_bad_input(struct ofi_node *n, unsigned char *buf)
{
	struct fi_xpu_ctx_info info;
	struct rma_desc d;
	struct iovec two[2];
	struct fi_op_cntr cop;
	unsigned char junk[64];

	CHECK(fi_xpu_ctx_getinfo(n->ctx, &info));
	EXPECT(info.caps & FI_XPU_CAP_WR);
	EXPECT_EQ(info.max_tx_wr_desc_size, WR);
	EXPECT_EQ(info.max_rx_wr_desc_size, WR);

	rma_write(n, &d, n->local, 0, buf);
	EXPECT_EQ(fi_xpu_prepare_wr(NULL, &d.work), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], NULL), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_prepare_wr((struct fid_xpu_host_ep *)n->hcq[0], &d.work), -FI_EINVAL);
	/* Size query: libfabric's -FI_ETOOSMALL with the size needed. */
	d.work.wr_len = 0;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_ETOOSMALL);
	EXPECT_EQ(d.work.wr_len, WR);
	d.work.wr_len = WR - 1;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_ETOOSMALL);
	EXPECT_EQ(d.work.wr_len, WR);
	d.work.wr_buf = NULL;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EINVAL);

	rma_write(n, &d, n->local, 0, buf);
	d.work.op_type = (enum fi_op_type)99;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EINVAL);
	memset(&cop, 0, sizeof(cop));
	d.work.op_type = FI_OP_CNTR_ADD;
	d.work.op.rma = (struct fi_op_rma *)(void *)&cop;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EOPNOTSUPP);

	rma_write(n, &d, n->local, 0, buf);
	d.work.op.rma = NULL;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EINVAL);
	rma_write(n, &d, n->local, 0, buf);
	d.op.ep = NULL; /* another endpoint than the one asked */
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EINVAL);
	rma_write(n, &d, n->local, 0, buf);
	d.op.flags = FI_MULTI_RECV;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EBADFLAGS);
	rma_write(n, &d, n->local, 0, buf);
	two[0] = d.iov;
	two[1] = d.iov;
	d.op.msg.msg_iov = two;
	d.op.msg.iov_count = 2;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EINVAL);
	rma_write(n, &d, n->local, 0, buf);
	d.op.msg.rma_iov_count = 0;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EINVAL);
	rma_write(n, &d, n->local, 0, buf);
	d.riov.len = 16; /* remote and local lengths differ */
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EINVAL);
	rma_write(n, &d, n->local, 0, buf);
	d.desc = junk; /* not a registration */
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EINVAL);
	rma_write(n, &d, n->local, 0, buf);
	d.op.msg.addr = 77; /* not in the AV */
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &d.work), -FI_EINVAL);

	/* Through the fid, as libfabric's fi_prepare_wr calls it. */
	rma_write(n, &d, n->local, 0, buf);
	d.desc = n->mr;
	EXPECT_EQ(n->hep[0]->fid.ops->control(&n->hep[0]->fid, FI_PREPARE_WORK, &d.work), 0);
	EXPECT_EQ(d.work.wr_len, WR);
	EXPECT_EQ(n->hep[0]->fid.ops->control(&n->hep[0]->fid, FI_QUEUE_WORK, &d.work),
		  -FI_EOPNOTSUPP);
	EXPECT_EQ(n->hep[0]->fid.ops->control(&n->hep[0]->fid, FI_FLUSH_WORK, NULL),
		  -FI_EOPNOTSUPP);
	EXPECT_EQ(n->hep[0]->fid.ops->control(&n->hep[0]->fid, 12345, NULL), -FI_ENOSYS);
	EXPECT_EQ(n->hcq[0]->fid.ops->control(&n->hcq[0]->fid, FI_PREPARE_WORK, &d.work),
		  -FI_EINVAL);
}

static void device_bad_input(struct ofi_node *n, unsigned char *wr)
{
	unsigned char junk[WR];
	struct fi_xpu_wr *w = (struct fi_xpu_wr *)(void *)junk;
	memset(junk, 0, sizeof(junk));
	EXPECT_EQ(fi_xpu_queue_wr(&n->ep[0], NULL, WR, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_queue_wr(&n->ep[0], junk, WR, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_queue_wr(&n->ep[0], wr, WR - 1, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_queue_wr(NULL, wr, WR, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_queue_wr(&n->ep[0], wr, WR, 7), -FI_EINVAL);
	/* Prepared for another provider. */
	memcpy(junk, wr, WR);
	w->prov_id ^= 1;
	EXPECT_EQ(fi_xpu_queue_wr(&n->ep[0], junk, WR, FI_XPU_WORK_ITEM), -FI_EINVAL);
	/* From another library version. */
	memcpy(junk, wr, WR);
	w->magic ^= 1;
	EXPECT_EQ(fi_xpu_queue_wr(&n->ep[0], junk, WR, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_wr_set_buf(junk, NULL, 0), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_wr_set_remote(junk, 0), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_wr_set_data(junk, 0), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_wr_set_tag(junk, 0), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_wr_set_context(NULL, NULL), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_flush_wr(NULL, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_flush_wr(&n->ep[0], 7), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_flush_wr(&n->ep[0], FI_XPU_WORK_ITEM), 0);
}

static void initiator(struct ofi_node *n)
{
	/* Requests live in memory the device reads: the context's. */
	unsigned char *wrs = n->local + 8192, *src = n->local, *res = n->local + 4096;
	struct kargs a;
	struct rma_desc d;
	struct iovec iov;
	struct fi_op_msg sop;
	struct fi_ioc ioc;
	struct fi_rma_ioc rioc;
	struct fi_op_atomic aop;
	struct fi_op_fetch_atomic fop;
	struct fi_ioc rres;
	struct fi_wr_attr work;
	uint64_t one = 1, ten = 10, base;
	int i;

	host_bad_input(n, wrs);

	/* A group of NW queues one write each, with its own source, target
	 * and data. */
	for (i = 0; i < NW; i++) {
		memcpy(src + 8 * i, &(uint64_t){ 0x1000 + (uint64_t)i }, 8);
		rma_write(n, &d, src, 0, wrs + (size_t)i * WR);
		CHECK(fi_xpu_prepare_wr(n->hep[0], &d.work));
		EXPECT_EQ(d.work.wr_len, WR);
	}
	device_bad_input(n, wrs);
	memset(&a, 0, sizeof(a));
	a.ep = &n->ep[0];
	a.wrs = wrs;
	a.src = src;
	a.base = n->peer.base;
	a.bad = -1;
	base = counter(n);
	launch(NW, queue_kernel, &a);
	for (i = 0; i < NW; i++) {
		EXPECT_EQ(a.set_rc[i], 0);
		EXPECT_EQ(a.queue_rc[i], 0);
		EXPECT_EQ(a.flush_rc[i], 0);
	}
	wait_counter(n, base + NW);

	/* One member's request is no request: it alone gets -FI_EINVAL, the
	 * others' writes land (at OFF_BAD). */
	for (i = 0; i < 4; i++) {
		memcpy(src + 8 * i, &(uint64_t){ 0x2000 + (uint64_t)i }, 8);
		rma_write(n, &d, src, 0, wrs + (size_t)i * WR);
		CHECK(fi_xpu_prepare_wr(n->hep[0], &d.work));
	}
	memset(wrs + 2 * WR, 0, 8); /* member 2: the magic word gone */
	a.base = n->peer.base + OFF_BAD;
	a.bad = 2;
	base = counter(n);
	launch(4, queue_kernel, &a);
	for (i = 0; i < 4; i++) {
		EXPECT_EQ(a.queue_rc[i], i == 2 ? -FI_EINVAL : 0);
		EXPECT_EQ(a.set_rc[i], i == 2 ? -FI_EINVAL : 0);
		EXPECT_EQ(a.flush_rc[i], 0);
	}
	wait_counter(n, base + 3);

	/* A prepared send, matched by the peer's prepared receive. */
	for (i = 0; i < MSG; i++)
		src[256 + i] = (unsigned char)(0xa0 + i);
	memset(&sop, 0, sizeof(sop));
	iov.iov_base = src + 256;
	iov.iov_len = MSG;
	sop.ep = (struct fid_ep *)n->hep[0];
	sop.msg.msg_iov = &iov;
	sop.msg.iov_count = 1;
	sop.msg.addr = 0;
	work = (struct fi_wr_attr){ .op_type = FI_OP_SEND, .op.msg = &sop,
		.wr_buf = wrs, .wr_len = WR };
	CHECK(fi_xpu_prepare_wr(n->hep[0], &work));
	ofi_barrier(n); /* the peer's receive is queued */
	base = counter(n);
	EXPECT_EQ(fi_xpu_queue_wr(&n->ep[0], wrs, WR, FI_XPU_WORK_ITEM), 0);
	EXPECT_EQ(fi_xpu_flush_wr(&n->ep[0], FI_XPU_WORK_ITEM), 0);
	wait_counter(n, base + 1);

	/* Four members add one each to the peer's word (FI_SUM, uint64). */
	memcpy(src + 512, &one, 8);
	for (i = 0; i < 4; i++) {
		memset(&aop, 0, sizeof(aop));
		ioc.addr = src + 512;
		ioc.count = 1;
		rioc.addr = n->peer.base + OFF_ATOM;
		rioc.count = 1;
		rioc.key = n->peer.key;
		aop.ep = (struct fid_ep *)n->hep[0];
		aop.msg.msg_iov = &ioc;
		aop.msg.iov_count = 1;
		aop.msg.addr = 0;
		aop.msg.rma_iov = &rioc;
		aop.msg.rma_iov_count = 1;
		aop.msg.datatype = FI_UINT64;
		aop.msg.op = FI_SUM;
		work = (struct fi_wr_attr){ .op_type = FI_OP_ATOMIC, .op.atomic = &aop,
			.wr_buf = wrs + (size_t)i * WR, .wr_len = WR };
		CHECK(fi_xpu_prepare_wr(n->hep[0], &work));
	}
	base = counter(n);
	launch(4, atomic_kernel, &a);
	for (i = 0; i < 4; i++) {
		EXPECT_EQ(a.queue_rc[i], 0);
		EXPECT_EQ(a.flush_rc[i], 0);
	}
	wait_counter(n, base + 4);

	/* A fetching add: the old value (4) comes back. */
	memcpy(src + 520, &ten, 8);
	memset(res, 0xff, 8);
	memset(&fop, 0, sizeof(fop));
	ioc.addr = src + 520;
	fop.ep = (struct fid_ep *)n->hep[0];
	fop.msg = aop.msg;
	fop.msg.msg_iov = &ioc;
	rres.addr = res;
	rres.count = 1;
	fop.fetch.msg_iov = &rres;
	fop.fetch.iov_count = 1;
	work = (struct fi_wr_attr){ .op_type = FI_OP_FETCH_ATOMIC, .op.fetch_atomic = &fop,
		.wr_buf = wrs, .wr_len = WR };
	CHECK(fi_xpu_prepare_wr(n->hep[0], &work));
	fop.fetch.iov_count = 0; /* a fetch without its result buffer */
	work.wr_buf = wrs + WR;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &work), -FI_EINVAL);
	base = counter(n);
	EXPECT_EQ(fi_xpu_queue_wr(&n->ep[0], wrs, WR, FI_XPU_WORK_ITEM), 0);
	EXPECT_EQ(fi_xpu_flush_wr(&n->ep[0], FI_XPU_WORK_ITEM), 0);
	wait_counter(n, base + 1);
	EXPECT_EQ(*(uint64_t *)(void *)res, 4);
}

static void target(struct ofi_node *n)
{
	unsigned char *wr = n->local + 8192;
	struct iovec iov;
	void *desc = n->mr;
	struct fi_op_msg rop;
	struct fi_wr_attr work;
	struct fi_cq_tagged_entry e;
	int i;

	memset(&rop, 0, sizeof(rop));
	iov.iov_base = n->heap + OFF_MSG;
	iov.iov_len = MSG;
	rop.ep = (struct fid_ep *)n->hep[0];
	rop.msg.msg_iov = &iov;
	rop.msg.desc = &desc;
	rop.msg.iov_count = 1;
	rop.msg.addr = FI_ADDR_UNSPEC; /* from anyone */
	rop.msg.context = (void *)0x77;
	work = (struct fi_wr_attr){ .op_type = FI_OP_RECV, .op.msg = &rop,
		.wr_buf = wr, .wr_len = WR };
	CHECK(fi_xpu_prepare_wr(n->hep[0], &work));
	rop.flags = FI_INJECT; /* receives take no FI_INJECT */
	work.wr_buf = wr + WR;
	EXPECT_EQ(fi_xpu_prepare_wr(n->hep[0], &work), -FI_EBADFLAGS);
	EXPECT_EQ(fi_xpu_queue_wr(&n->ep[0], wr, WR, FI_XPU_WORK_ITEM), 0);
	EXPECT_EQ(fi_xpu_flush_wr(&n->ep[0], FI_XPU_WORK_ITEM), 0);
	ofi_barrier(n);
	memset(&e, 0, sizeof(e));
	EXPECT_EQ(fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	EXPECT(e.op_context == (void *)0x77);
	EXPECT_EQ(e.len, MSG);
	for (i = 0; i < MSG; i++)
		EXPECT_EQ(n->heap[OFF_MSG + i], 0xa0 + i);
}

static void check_target(struct ofi_node *n)
{
	uint64_t v;
	int i;
	for (i = 0; i < NW; i++) {
		memcpy(&v, n->heap + 8 * i, 8);
		EXPECT_EQ(v, 0x1000 + (uint64_t)i);
	}
	for (i = 0; i < 4; i++) {
		memcpy(&v, n->heap + OFF_BAD + 8 * i, 8);
		EXPECT_EQ(v, i == 2 ? 0 : 0x2000 + (uint64_t)i);
	}
	memcpy(&v, n->heap + OFF_ATOM, 8);
	EXPECT_EQ(v, 14);
}

static int run(int sock, int rank)
{
	struct ofi_node n;
	struct ofi_opts o = { .nep = 1, .heap = 4096, .ring = 64, .cq_size = 256 };
	ofi_setup(&n, sock, rank, &o);
	ofi_roles(&n, initiator, target);
	if (rank == 1)
		check_target(&n);
	ofi_barrier(&n);
	ofi_teardown(&n);
	return 0;
}

int main(void)
{
	return ofi_pair_main("wr", NULL, run);
}
