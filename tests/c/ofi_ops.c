/* Two processes (fork + socketpair) on the ofi provider: RMA write and read,
 * fetching and compare atomics, tagged send/receive, CQ data, counters and
 * error completions, all posted through the device API and checked by value;
 * local buffers that lie in no memory of the context (a wild pointer,
 * private host memory) end in error completions, FI_INJECT sources may be
 * private; writes with CQ data beyond what the target's CQ holds end in an
 * FI_EOVERRUN entry counting the completions lost.
 * The libfabric provider comes from FI_XPU_OFI_PROVIDER. With OFI_OPS_FD and
 * OFI_OPS_RANK set, runs one side only over that inherited socket. */
#include <sys/socket.h>
#include <sys/wait.h>

#include "ofi_common.h"

#define CQ_SIZE 64

struct card {
	uint8_t name[64];
	uint64_t base, key;
};

static struct fi_cq_tagged_entry wait_one(struct fid_xpu_cq *cq, struct fi_cq_err_entry *err)
{
	struct fi_cq_tagged_entry e;
	int64_t n = fi_xpu_cq_sread(cq, &e, 1, 1, FI_XPU_WORK_ITEM);
	if (n == -FI_EAVAIL && err) {
		CHECK(fi_xpu_cq_readerr(cq, err, 0, FI_XPU_WORK_ITEM));
		memset(&e, 0, sizeof e);
		return e;
	}
	CHECK(n);
	EXPECT(n == 1);
	return e;
}

#define OVERRUN_WRITES (CQ_SIZE + 6)

/* The target of OVERRUN_WRITES writes with CQ data into its CQ of CQ_SIZE
 * entries, read only once all arrived: CQ_SIZE entries, then, the queue
 * having room again, one FI_EOVERRUN entry counting the 6 lost (the
 * progress thread reports it; nothing else completes here), then nothing. */
static void overrun_seen(struct fid_xpu_cq *cq)
{
	const struct fi_xpu_ofi_cq_dev *q =
		(const struct fi_xpu_ofi_cq_dev *)(uintptr_t)cq->fid.prov_ctx;
	struct fi_cq_tagged_entry es[16];
	struct fi_cq_err_entry err;
	uint64_t t0 = ofi_now_ms();
	int seen[OVERRUN_WRITES] = { 0 }, got = 0;
	int64_t n;

	/* Every write arrived: stored, or counted as lost. */
	while (__atomic_load_n(&q->tail, __ATOMIC_ACQUIRE) - __atomic_load_n(&q->head, __ATOMIC_ACQUIRE) +
		       __atomic_load_n(&q->overflow, __ATOMIC_ACQUIRE) <
	       OVERRUN_WRITES) {
		if (ofi_now_ms() - t0 > 10000) {
			fprintf(stderr, "overrun: %llu stored, %llu lost after 10 s\n",
				(unsigned long long)(q->tail - q->head),
				(unsigned long long)q->overflow);
			exit(1);
		}
		usleep(1000);
	}
	EXPECT_EQ(q->tail - q->head, CQ_SIZE);
	while (got < CQ_SIZE) {
		n = fi_xpu_cq_read(cq, es, 16, FI_XPU_WORK_ITEM);
		EXPECT(n > 0);
		if (n <= 0)
			break;
		for (int64_t k = 0; k < n; k++) {
			uint64_t d = es[k].data - 0x7000;
			EXPECT(es[k].flags & FI_REMOTE_CQ_DATA);
			EXPECT(d < OVERRUN_WRITES && !seen[d]);
			if (d < OVERRUN_WRITES)
				seen[d] = 1;
		}
		got += (int)n;
	}
	EXPECT_EQ(got, CQ_SIZE);
	/* Room again: the loss is reported, never silent. */
	t0 = ofi_now_ms();
	while ((n = fi_xpu_cq_read(cq, es, 16, FI_XPU_WORK_ITEM)) == -FI_EAGAIN &&
	       ofi_now_ms() - t0 < 10000)
		usleep(1000);
	EXPECT_EQ(n, -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	EXPECT_EQ(fi_xpu_cq_readerr(cq, &err, 0, FI_XPU_WORK_ITEM), 1);
	EXPECT_EQ(err.err, FI_EOVERRUN);
	EXPECT_EQ(err.olen, OVERRUN_WRITES - CQ_SIZE);
	EXPECT_EQ(fi_xpu_cq_read(cq, es, 16, FI_XPU_WORK_ITEM), -FI_EAGAIN);
}

static int run(int sock, int rank)
{
	struct ofi_objs o;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_mr *mr;
	struct fid_xpu_cq cq;
	struct fid_xpu_cntr cntr;
	struct fid_xpu_ep ep;
	struct fi_xpu_ep_attr eattr = { 0 };
	struct card mine = { 0 }, peer;
	struct fi_cq_err_entry err;
	uint8_t desc[32];
	size_t len = sizeof(mine.name);
	fi_addr_t fa;
	uint64_t raw, *heap, off;
	int fd;
	char c = 0;

	EXPECT(ofi_open_objs(&o, CQ_SIZE, 1) == 64);
	eattr.xpu_ctx = o.ctx;
	CHECK(fi_xpu_endpoint(o.dom, &eattr, &hep, NULL));
	EXPECT(fi_xpu_getname(hep, mine.name, &len) == -FI_EOPBADSTATE);
	CHECK(fi_xpu_ep_bind(hep, &o.av->fid, 0));
	CHECK(fi_xpu_ep_bind(hep, &o.hcq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_ep_bind(hep, &o.hcntr->fid, FI_WRITE | FI_READ));
	CHECK(fi_xpu_enable(hep));
	CHECK(fi_xpu_getname(hep, mine.name, &len));
	CHECK(fi_xpu_alloc(o.ctx, 4096, 0, 0, (void **)&heap, &fd, &off));
	memset(heap, 0, 4096);
	heap[0] = 1000 + (uint64_t)rank;
	CHECK(fi_xpu_mr_reg(o.dom, o.ctx, heap, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr,
			    NULL));
	CHECK(fi_xpu_mr_key(mr, &mine.key));
	len = sizeof(desc);
	CHECK(fi_xpu_mr_desc(mr, desc, &len, 0, o.ctx));
	mine.base = (uint64_t)(uintptr_t)heap;
	ofi_xfer(sock, &mine, &peer, sizeof(mine));
	EXPECT(fi_xpu_av_insert(o.av, peer.name, 1, &fa, 0, NULL) == 1);
	len = sizeof(raw);
	CHECK(fi_xpu_av_lookup(o.av, fa, &raw, &len, 0, o.ctx));
	CHECK(fi_xpu_export(&hep->fid, 0, &ep.fid));
	CHECK(fi_xpu_export(&o.hcq->fid, 0, &cq.fid));
	CHECK(fi_xpu_export(&o.hcntr->fid, 0, &cntr.fid));

	if (rank == 0) {
		struct fi_cq_tagged_entry e;
		/* Local buffers live in the registered allocation: the proxy
		 * hands libfabric nothing else. */
		uint64_t *v = heap + 64, *got = heap + 65, *one = heap + 66, *cmp = heap + 67;
		uint64_t *swap = heap + 68, *old = heap + 69;
		uint64_t bad = 0, secret = 0x5ec2e7, stack_v = 0x1e1e;
		*v = 0xabcdef;
		*one = 5;
		*cmp = 1006;
		*swap = 77;
		/* write then read back */
		CHECK(fi_xpu_write(&ep, v, 8, NULL, 0, &raw, peer.base + 8, peer.key, v, 0,
				   FI_XPU_WORK_ITEM));
		e = wait_one(&cq, NULL);
		EXPECT(e.op_context == v && (e.flags & (FI_RMA | FI_WRITE)) == (FI_RMA | FI_WRITE));
		CHECK(fi_xpu_read(&ep, got, 8, NULL, &raw, peer.base + 8, peer.key, got, 0,
				  FI_XPU_WORK_ITEM));
		e = wait_one(&cq, NULL);
		EXPECT(e.op_context == got && *got == 0xabcdef);
		/* fetch-add then compare-swap on the peer's heap[0] (1001) */
		CHECK(fi_xpu_fetch_atomic(&ep, one, 1, NULL, old, NULL, &raw, peer.base, peer.key,
					  FI_UINT64, FI_SUM, NULL, 0, FI_XPU_WORK_ITEM));
		(void)wait_one(&cq, NULL);
		EXPECT(*old == 1001);
		CHECK(fi_xpu_compare_atomic(&ep, swap, 1, NULL, cmp, NULL, old, NULL, &raw,
					    peer.base, peer.key, FI_UINT64, FI_CSWAP, NULL, 0,
					    FI_XPU_WORK_ITEM));
		(void)wait_one(&cq, NULL);
		EXPECT(*old == 1006);
		CHECK(fi_xpu_flush(&ep, 0, FI_XPU_WORK_ITEM));
		EXPECT(fi_xpu_cntr_read(&cntr, FI_XPU_WORK_ITEM) == 4);
		/* a local buffer outside its descriptor: an error completion */
		CHECK(fi_xpu_write(&ep, &bad, 8, desc, 0, &raw, peer.base, peer.key, &bad, 0,
				   FI_XPU_WORK_ITEM));
		e = wait_one(&cq, &err);
		EXPECT(err.err == FI_EACCES && err.op_context == &bad);
		EXPECT(fi_xpu_cntr_readerr(&cntr, FI_XPU_WORK_ITEM) == 1);
		/* Without a descriptor: a wild pointer, which would crash the
		 * process inside libfabric, and private host memory, which would
		 * be sent to the peer, both end in error completions. So do a
		 * read into private memory and a fetch into a wild result. */
		CHECK(fi_xpu_write(&ep, (void *)(uintptr_t)0xdead0000, 8, NULL, 0, &raw,
				   peer.base + 16, peer.key, &bad, 0, FI_XPU_WORK_ITEM));
		e = wait_one(&cq, &err);
		EXPECT(err.err == FI_EACCES && err.op_context == &bad);
		CHECK(fi_xpu_write(&ep, &secret, 8, NULL, 0, &raw, peer.base + 16, peer.key,
				   &secret, 0, FI_XPU_WORK_ITEM));
		e = wait_one(&cq, &err);
		EXPECT(err.err == FI_EACCES && err.op_context == &secret);
		EXPECT(fi_xpu_cntr_readerr(&cntr, FI_XPU_WORK_ITEM) == 3);
		CHECK(fi_xpu_read(&ep, &secret, 8, NULL, &raw, peer.base + 8, peer.key, &secret,
				  0, FI_XPU_WORK_ITEM));
		e = wait_one(&cq, &err);
		EXPECT(err.err == FI_EACCES && err.op_context == &secret && secret == 0x5ec2e7);
		CHECK(fi_xpu_fetch_atomic(&ep, one, 1, NULL, (void *)(uintptr_t)0xdead0000, NULL,
					  &raw, peer.base, peer.key, FI_UINT64, FI_SUM, &bad, 0,
					  FI_XPU_WORK_ITEM));
		e = wait_one(&cq, &err);
		EXPECT(err.err == FI_EACCES && err.op_context == &bad);
		EXPECT(fi_xpu_cntr_readerr(&cntr, FI_XPU_WORK_ITEM) == 5);
		/* FI_INJECT: private memory is fine, the bytes travel in the ring. */
		CHECK(fi_xpu_write(&ep, &stack_v, 8, NULL, 0, &raw, peer.base + 24, peer.key, NULL,
				   FI_INJECT | FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
		stack_v = 0;
		(void)wait_one(&cq, NULL);
		/* 0 bytes with FI_DELIVERY_COMPLETE: nothing to deliver, it
		 * completes (libfabric's shm alone never completes it) */
		CHECK(fi_xpu_write(&ep, v, 0, desc, 0, &raw, peer.base + 24, peer.key, &stack_v,
				   FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
		e = wait_one(&cq, NULL);
		EXPECT(e.op_context == &stack_v && e.len == 0);
		/* tagged message with CQ data */
		if (read(sock, &c, 1) != 1)
			exit(1);
		CHECK(fi_xpu_tsend(&ep, v, 8, NULL, 0x55, &raw, 0x1234, NULL, FI_REMOTE_CQ_DATA,
				   FI_XPU_WORK_ITEM));
		(void)wait_one(&cq, NULL);
		if (read(sock, &c, 1) != 1)
			exit(1);
		/* an RMA write with CQ data: the target's completion carries its length */
		uint64_t *pair = &heap[16]; /* a source the context knows */
		pair[0] = 0x1111;
		pair[1] = 0x2222;
		CHECK(fi_xpu_write(&ep, pair, 16, NULL, 0x66, &raw, peer.base + 64, peer.key, pair,
				   FI_REMOTE_CQ_DATA, FI_XPU_WORK_ITEM));
		e = wait_one(&cq, NULL);
		EXPECT(e.op_context == pair);
		if (read(sock, &c, 1) != 1)
			exit(1);
		/* More writes with CQ data than the peer's CQ holds, which the
		 * peer does not read meanwhile (see overrun_seen). */
		for (uint64_t k = 0; k < OVERRUN_WRITES; k++) {
			CHECK(fi_xpu_write(&ep, pair, 8, NULL, 0x7000 + k, &raw, peer.base + 64,
					   peer.key, pair, FI_REMOTE_CQ_DATA, FI_XPU_WORK_ITEM));
			e = wait_one(&cq, NULL);
			EXPECT(e.op_context == pair);
		}
		if (write(sock, "o", 1) != 1 || read(sock, &c, 1) != 1)
			exit(1);
	} else {
		struct fi_cq_tagged_entry e;
		uint64_t *box = heap + 64, secret = 0x5ec2e7;
		/* A receive into private memory is refused as well. */
		CHECK(fi_xpu_trecv(&ep, &secret, 8, NULL, NULL, 0x1200, 0xff, &secret, 0,
				   FI_XPU_WORK_ITEM));
		e = wait_one(&cq, &err);
		EXPECT(err.err == FI_EACCES && err.op_context == &secret);
		CHECK(fi_xpu_trecv(&ep, box, 8, NULL, NULL, 0x1200, 0xff, box, 0,
				   FI_XPU_WORK_ITEM));
		if (write(sock, "r", 1) != 1)
			exit(1);
		e = wait_one(&cq, NULL);
		EXPECT(e.op_context == box && *box == 0xabcdef && e.tag == 0x1234);
		EXPECT((e.flags & (FI_TAGGED | FI_RECV)) == (FI_TAGGED | FI_RECV));
		EXPECT((e.flags & FI_REMOTE_CQ_DATA) && e.data == 0x55 && e.len == 8);
		EXPECT(heap[1] == 0xabcdef && heap[0] == 77 && heap[2] == 0 && heap[3] == 0x1e1e);
		EXPECT(secret == 0x5ec2e7);
		if (write(sock, "d", 1) != 1)
			exit(1);
		/* the same flags and len on every provider (shm_ops.c checks shm) */
		e = wait_one(&cq, NULL);
		EXPECT_EQ(e.flags & (FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA),
			  FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA);
		EXPECT_EQ(e.data, 0x66);
		EXPECT_EQ(e.len, 0);
		EXPECT(heap[8] == 0x1111 && heap[9] == 0x2222);
		if (write(sock, "e", 1) != 1 || read(sock, &c, 1) != 1)
			exit(1);
		overrun_seen(&cq);
		if (write(sock, "f", 1) != 1)
			exit(1);
	}
	CHECK(fi_xpu_close(&hep->fid));
	CHECK(fi_xpu_close(&mr->fid));
	CHECK(fi_xpu_free(o.ctx, heap));
	ofi_close_objs(&o);
	return 0;
}

int main(void)
{
	pid_t child;
	int sock;
	const char *fd = getenv("OFI_OPS_FD"), *rank = getenv("OFI_OPS_RANK");
	/* One side only, talking to its peer over an inherited socket: the two
	 * sides may run in different network namespaces. */
	if (fd && rank) {
		if (run(atoi(fd), atoi(rank)) != 0)
			return 1;
		printf("ofi_ops rank %s: ok\n", rank);
		return 0;
	}
	sock = ofi_fork_peer(NULL, run, &child);
	if (run(sock, 0) != 0 || !ofi_peer_ok(child))
		return 1;
	printf("ofi_ops: ok\n");
	return 0;
}
