/* The ofi provider under pressure, two processes (fork + socketpair), the
 * libfabric provider from FI_XPU_OFI_PROVIDER. One mode per run:
 *
 *   death      the peer is killed (SIGKILL) while it writes to us; our waits
 *              on it end with an error or a timeout, and we close cleanly
 *              and in bounded time, also when the peer died holding a lock
 *              of ours inside libfabric (forced with ofi_wedge.c).
 *   flood      far more writes than the ring holds, without reaping: the
 *              device call says -FI_EAGAIN, then every write completes once
 *              completions are read, with the right data at the target.
 *   malformed  raw ring entries with a bad opcode, length, descriptor, peer
 *              address, flags or buffer: error completions with the
 *              documented codes, error counts, and good entries around
 *              them still served.
 *   stalled    a claimed slot left unpublished is waited for as long as
 *              nothing behind it is published; one whose `seq` is wrong
 *              while the next entry is published becomes an error
 *              completion after FI_XPU_OFI_STALL_MS, and the ring goes on.
 *   scopes     the host launcher posts on two endpoints served by two
 *              progress threads: cooperative writes (fi_xpu_coop_write) at
 *              FI_XPU_WORK_GROUP and FI_XPU_SUBGROUP scope, one ring entry
 *              per group; a fetching atomic at FI_XPU_DEVICE scope, one per
 *              work item, each with its own fetched value; correct data;
 *              then a write and read through the peer's second
 *              registration.
 */
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "ofi_common.h"

static pid_t child_pid;

/* ---- death --------------------------------------------------------------- */
#define DEATH_WAIT_MS 2000
/* Writes the victim completes before it arms ofi_wedge.c, when that is
 * preloaded: more than the 20 the survivor waits to see. */
#define DEATH_ARM_AFTER 25
/* The whole teardown of the survivor, a generous bound on a hang: every
 * close finishes within FI_XPU_OFI_CLOSE_MS even when a progress thread is
 * stuck inside libfabric. */
#define DEATH_TEARDOWN_MS 20000

void ofi_wedge_arm(void) __attribute__((weak));

/* Writes an increasing count into the survivor's heap until it is killed.
 * When ofi_wedge.c kills it instead (in the middle of a write, after
 * DEATH_ARM_AFTER of them), each write is delivered before the next is
 * posted, so that the survivor has seen every earlier one: a write stuck
 * in the survivor's locked queue never lands. */
static void victim(struct ofi_node *n)
{
	uint64_t *v = (uint64_t *)n->local;
	uint64_t flags = ofi_wedge_arm ? FI_DELIVERY_COMPLETE : 0;
	struct fi_cq_tagged_entry e;
	for (;;) {
		(*v)++;
		CHECK(fi_xpu_write(&n->ep[0], v, 8, NULL, 0, &n->raw[0], n->peer.base,
				   n->peer.key, v, flags, FI_XPU_WORK_ITEM));
		CHECK(fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM));
		if (*v == DEATH_ARM_AFTER && ofi_wedge_arm)
			ofi_wedge_arm();
		/* A libfabric without such locks never sets it off. */
		if (*v == DEATH_ARM_AFTER + 100 && ofi_wedge_arm)
			raise(SIGKILL);
	}
}

/* An error completion of ours, or nothing: never a success. */
static void expect_failure(struct fid_xpu_cq *cq, int64_t rc, const void *a, const void *b,
			   const char *what)
{
	struct fi_cq_err_entry err;
	if (rc == -FI_EAVAIL) {
		EXPECT_EQ(fi_xpu_cq_readerr(cq, &err, 0, FI_XPU_WORK_ITEM), 1);
		EXPECT(err.err > 0);
		EXPECT(err.op_context == a || err.op_context == b);
		printf("death: %s: error completion %d (%s)\n", what, err.err,
		       fi_xpu_strerror(-err.err));
		return;
	}
	if (rc != -FI_ETIMEDOUT && rc != -FI_EAGAIN) {
		fprintf(stderr, "death: %s returned %" PRId64 "\n", what, rc);
		exit(1);
	}
	printf("death: %s: %s\n", what, fi_xpu_strerror((int)rc));
}

static void survivor(struct ofi_node *n)
{
	uint64_t *box = (uint64_t *)n->local, *v = box + 1;
	volatile uint64_t *seen = (volatile uint64_t *)n->heap;
	struct fi_cq_tagged_entry e;
	uint64_t t0, before;
	int st = 0, rc;
	int64_t r;

	*v = 0x5eed;
	CHECK(fi_xpu_trecv(&n->ep[0], box, 8, NULL, &n->raw[0], 7, 0, box, 0,
			   FI_XPU_WORK_ITEM));
	/* Kill the peer in the middle of its stream of writes. */
	t0 = ofi_now_ms();
	while (*seen < 20) {
		EXPECT(ofi_now_ms() - t0 < 30000);
		usleep(100);
	}
	if (ofi_wedge_arm) {
		/* ofi_wedge.c kills it in the middle of a write, holding our
		 * queue's lock where libfabric has one. */
		while (waitpid(child_pid, &st, WNOHANG) == 0) {
			EXPECT(ofi_now_ms() - t0 < 30000);
			usleep(1000);
		}
	} else {
		EXPECT(kill(child_pid, SIGKILL) == 0);
		EXPECT(waitpid(child_pid, &st, 0) == child_pid);
	}
	EXPECT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	printf("death: peer %d killed after %" PRIu64 " writes\n", (int)child_pid, *seen);

	/* A counter wait on a write to the dead peer. */
	before = fi_xpu_cntr_read(&n->cntr, FI_XPU_WORK_ITEM);
	CHECK(fi_xpu_write(&n->ep[0], v, 8, NULL, 0, &n->raw[0], n->peer.base + 8, n->peer.key,
			   v, FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
	t0 = ofi_now_ms();
	rc = fi_xpu_cntr_wait_status(&n->cntr, before + 1, DEATH_WAIT_MS, FI_XPU_WORK_ITEM);
	EXPECT(rc == -FI_ETIMEDOUT || rc == -FI_EAVAIL);
	EXPECT(ofi_now_ms() - t0 < DEATH_WAIT_MS + 2000);
	printf("death: cntr_wait: %s\n", fi_xpu_strerror(rc));

	/* A blocking CQ read, limited by the CQ's timeout. */
	t0 = ofi_now_ms();
	r = fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM);
	expect_failure(&n->cq[0], r, v, box, "cq_sread");
	EXPECT(ofi_now_ms() - t0 < DEATH_WAIT_MS + 2000);

	/* A polling loop bounded by time. */
	t0 = ofi_now_ms();
	while (ofi_now_ms() - t0 < 1000) {
		r = fi_xpu_cq_read(&n->cq[0], &e, 1, FI_XPU_WORK_ITEM);
		if (r != -FI_EAGAIN)
			expect_failure(&n->cq[0], r, v, box, "cq_read");
		usleep(1000);
	}

	/* Flush waits for the write libfabric may never finish. */
	rc = fi_xpu_flush(&n->ep[0], 0, FI_XPU_WORK_ITEM);
	EXPECT(rc == 0 || rc == -FI_ETIMEDOUT);
	printf("death: flush: %s\n", rc ? fi_xpu_strerror(rc) : "done");
	/* Posting still works: the ring is the process's own memory. */
	rc = fi_xpu_write(&n->ep[0], v, 8, NULL, 0, &n->raw[0], n->peer.base, n->peer.key, v,
			  0, FI_XPU_WORK_ITEM);
	EXPECT(rc == 0 || rc == -FI_EAGAIN);
}

/* ---- flood --------------------------------------------------------------- */
#define FLOOD_OPS 1000
#define FLOOD_RING 8
#define FLOOD_CQ 16

static uint64_t flood_val(uint64_t i)
{
	return (i + 1) * 0x9e3779b97f4a7c15ULL;
}

static void flood_sender(struct ofi_node *n)
{
	uint64_t *src = (uint64_t *)n->local;
	static unsigned char done[FLOOD_OPS];
	struct fi_cq_tagged_entry e[8];
	uint64_t posted = 0, completed = 0, eagain = 0, first_full = 0, t0 = ofi_now_ms();
	struct fi_xpu_ofi_ep_dev *d;
	int rc;

	for (uint64_t i = 0; i < FLOOD_OPS; i++)
		src[i] = flood_val(i);
	/* Without reading a completion: the proxy holds back once every CQ
	 * slot is promised, so the ring fills and the device is told. */
	for (;;) {
		rc = fi_xpu_write(&n->ep[0], &src[posted], 8, NULL, 0, &n->raw[0],
				  n->peer.base + 8 * posted, n->peer.key, &src[posted], FI_DELIVERY_COMPLETE,
				  FI_XPU_WORK_ITEM);
		if (rc == -FI_EAGAIN)
			break;
		CHECK(rc);
		posted++;
		EXPECT(posted <= FLOOD_CQ + FLOOD_RING);
	}
	first_full = posted;
	EXPECT(posted >= FLOOD_RING);
	eagain = 1;
	/* The proxy may not have caught up yet. It takes entries (`cons` in
	 * the endpoint block) only while their completions fit in the CQ, so
	 * it stops at exactly one CQ's worth and the ring fills behind it. */
	d = (struct fi_xpu_ofi_ep_dev *)(uintptr_t)n->ep[0].fid.prov_ctx;
	while (__atomic_load_n(&d->cons, __ATOMIC_ACQUIRE) < FLOOD_CQ ||
	       posted < FLOOD_CQ + FLOOD_RING) {
		EXPECT(ofi_now_ms() - t0 < 20000);
		rc = fi_xpu_write(&n->ep[0], &src[posted], 8, NULL, 0, &n->raw[0],
				  n->peer.base + 8 * posted, n->peer.key, &src[posted],
				  FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM);
		if (rc == -FI_EAGAIN) {
			eagain++;
			usleep(1000);
			continue;
		}
		CHECK(rc);
		posted++;
		EXPECT(posted <= FLOOD_CQ + FLOOD_RING);
	}
	usleep(50000);
	EXPECT_EQ(__atomic_load_n(&d->cons, __ATOMIC_ACQUIRE), FLOOD_CQ);
	EXPECT_EQ(fi_xpu_write(&n->ep[0], &src[posted], 8, NULL, 0, &n->raw[0],
			       n->peer.base + 8 * posted, n->peer.key, &src[posted],
			       FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM),
		  -FI_EAGAIN);
	eagain++;
	while (completed < FLOOD_OPS) {
		int64_t got = fi_xpu_cq_read(&n->cq[0], e, 8, FI_XPU_WORK_ITEM);
		if (got > 0) {
			for (int64_t k = 0; k < got; k++) {
				uint64_t *p = (uint64_t *)e[k].op_context;
				EXPECT(p >= src && p < src + FLOOD_OPS);
				EXPECT(!done[p - src]);
				EXPECT((e[k].flags & (FI_RMA | FI_WRITE)) == (FI_RMA | FI_WRITE));
				done[p - src] = 1;
			}
			completed += (uint64_t)got;
		} else {
			EXPECT_EQ(got, -FI_EAGAIN);
			usleep(20);
		}
		while (posted < FLOOD_OPS) {
			rc = fi_xpu_write(&n->ep[0], &src[posted], 8, NULL, 0, &n->raw[0],
					  n->peer.base + 8 * posted, n->peer.key, &src[posted], FI_DELIVERY_COMPLETE,
					  FI_XPU_WORK_ITEM);
			if (rc == -FI_EAGAIN) {
				eagain++;
				break;
			}
			CHECK(rc);
			posted++;
		}
		EXPECT(ofi_now_ms() - t0 < 60000);
	}
	CHECK(fi_xpu_flush(&n->ep[0], 0, FI_XPU_WORK_ITEM));
	EXPECT_EQ(fi_xpu_cntr_read(&n->cntr, FI_XPU_WORK_ITEM), FLOOD_OPS);
	EXPECT_EQ(fi_xpu_cntr_readerr(&n->cntr, FI_XPU_WORK_ITEM), 0);
	EXPECT_EQ(fi_xpu_cq_read(&n->cq[0], e, 1, FI_XPU_WORK_ITEM), -FI_EAGAIN);
	printf("flood: %d writes, ring full after %" PRIu64 ", %" PRIu64 " x -FI_EAGAIN\n",
	       FLOOD_OPS, first_full, eagain);
}

static void flood_target(struct ofi_node *n)
{
	uint64_t v;
	for (uint64_t i = 0; i < FLOOD_OPS; i++) {
		memcpy(&v, n->heap + 8 * i, 8);
		if (v != flood_val(i)) {
			fprintf(stderr, "flood: slot %" PRIu64 " holds %" PRIx64 "\n", i, v);
			exit(1);
		}
	}
}

/* ---- malformed entries --------------------------------------------------- */
/* Publishes one raw entry as the man page describes: claim a position with
 * a CAS on `prod`, fill the 128 bytes, store `seq` last. */
static void inject(struct fid_xpu_ep *ep, const struct fi_xpu_ofi_wqe *w)
{
	struct fi_xpu_ofi_ep_dev *d = (struct fi_xpu_ofi_ep_dev *)(uintptr_t)ep->fid.prov_ctx;
	struct fi_xpu_ofi_wqe *ring = (struct fi_xpu_ofi_wqe *)(uintptr_t)d->ring, *slot;
	uint64_t pos = __atomic_load_n(&d->prod, __ATOMIC_RELAXED), t0 = ofi_now_ms();

	EXPECT(d->magic == FI_XPU_HANDLE_WORD(FI_XPU_HANDLE_EP, FI_XPU_HANDLE_LIVE));
	for (;;) {
		if (pos - __atomic_load_n(&d->cons, __ATOMIC_ACQUIRE) >= d->size) {
			EXPECT(ofi_now_ms() - t0 < 10000);
			pos = __atomic_load_n(&d->prod, __ATOMIC_RELAXED);
			continue;
		}
		if (__atomic_compare_exchange_n(&d->prod, &pos, pos + 1, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			break;
	}
	slot = &ring[pos & (d->size - 1)];
	memcpy((char *)slot + 8, (const char *)w + 8, sizeof(*w) - 8);
	__atomic_store_n(&slot->seq, pos + 1, __ATOMIC_RELEASE);
}

struct bad_case {
	const char *what;
	int err;
};

/* An 8-byte write from `src` to the peer heap at `off`, delivery complete,
 * with `src` as its context. */
static struct fi_xpu_ofi_wqe write_wqe(struct ofi_node *n, uint64_t *src, uint64_t off)
{
	struct fi_xpu_ofi_wqe w;
	memset(&w, 0, sizeof(w));
	w.op = FI_XPU_OFI_OP_WRITE;
	w.addr = n->raw[0];
	w.buf = (uint64_t)(uintptr_t)src;
	w.len = 8;
	w.raddr = n->peer.base + off;
	w.rkey = n->peer.key;
	w.context = (uint64_t)(uintptr_t)src;
	w.flags = FI_DELIVERY_COMPLETE;
	return w;
}

static void malformed_sender(struct ofi_node *n)
{
	static const struct bad_case cases[] = {
		{ "unknown opcode", FI_EINVAL },  { "length over the maximum", FI_EMSGSIZE },
		{ "bogus descriptor", FI_EINVAL }, { "unknown peer", FI_EINVAL },
		{ "unknown flag", FI_EBADFLAGS },  { "buffer outside its descriptor", FI_EACCES },
	};
	enum { NBAD = sizeof(cases) / sizeof(cases[0]) };
	uint64_t *good = (uint64_t *)n->local, *local = good + NBAD;
	static unsigned char bad_ctx[NBAD];
	unsigned char seen_bad[NBAD] = { 0 }, seen_good[NBAD] = { 0 };
	int got = 0;

	for (int i = 0; i < NBAD; i++) {
		/* A plain write; each case makes one field bad. */
		struct fi_xpu_ofi_wqe w = write_wqe(n, local, 512);
		w.flags = 0;
		w.context = (uint64_t)(uintptr_t)&bad_ctx[i];
		switch (i) {
		case 0:
			w.op = 99;
			break;
		case 1:
			/* One byte over the limit the endpoint block announces. */
			w.len = ((struct fi_xpu_ofi_ep_dev *)(uintptr_t)n->ep[0].fid.prov_ctx)
					->max_msg + 1;
			break;
		case 2:
			w.desc = 0x4f464d5200000777ULL;
			break;
		case 3:
			w.addr = 0xdead;
			break;
		case 4:
			w.flags = 1ULL << 62;
			break;
		case 5:
			/* 16 bytes from the last 8 of the registration. */
			w.buf = (uint64_t)(uintptr_t)(n->heap + n->heap_len - 8);
			w.len = 16;
			memcpy(&w.desc, n->desc, 8);
			break;
		}
		inject(&n->ep[0], &w);
		/* A good entry right behind each bad one. */
		good[i] = 0x600d0000 + (uint64_t)i;
		memset(&w, 0, sizeof(w));
		w.op = FI_XPU_OFI_OP_WRITE;
		w.addr = n->raw[0];
		w.buf = (uint64_t)(uintptr_t)&good[i];
		w.len = 8;
		w.raddr = n->peer.base + 8 * (uint64_t)i;
		w.rkey = n->peer.key;
		w.context = (uint64_t)(uintptr_t)&good[i];
		w.flags = FI_DELIVERY_COMPLETE;
		inject(&n->ep[0], &w);
	}
	while (got < 2 * NBAD) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int64_t r = fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM);
		if (r == -FI_EAVAIL) {
			int i;
			EXPECT_EQ(fi_xpu_cq_readerr(&n->cq[0], &err, 0, FI_XPU_WORK_ITEM), 1);
			i = (int)((unsigned char *)err.op_context - bad_ctx);
			EXPECT(i >= 0 && i < NBAD && !seen_bad[i]);
			if (err.err != cases[i].err) {
				fprintf(stderr, "malformed: %s gave %d, expected %d\n",
					cases[i].what, err.err, cases[i].err);
				exit(1);
			}
			seen_bad[i] = 1;
		} else {
			int i;
			CHECK(r);
			i = (int)((uint64_t *)e.op_context - good);
			EXPECT(i >= 0 && i < NBAD && !seen_good[i]);
			seen_good[i] = 1;
		}
		got++;
	}
	CHECK(fi_xpu_flush(&n->ep[0], 0, FI_XPU_WORK_ITEM));
	EXPECT_EQ(fi_xpu_cntr_read(&n->cntr, FI_XPU_WORK_ITEM), NBAD);
	EXPECT_EQ(fi_xpu_cntr_readerr(&n->cntr, FI_XPU_WORK_ITEM), NBAD);
	/* The device API still works on the same ring afterwards. */
	CHECK(fi_xpu_write(&n->ep[0], &good[0], 8, NULL, 0, &n->raw[0], n->peer.base + 256,
			   n->peer.key, &good[0], FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
	{
		struct fi_cq_tagged_entry e;
		EXPECT_EQ(fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM), 1);
		EXPECT(e.op_context == &good[0]);
	}
	printf("malformed: %d bad entries rejected, %d good ones served\n", NBAD, NBAD + 1);
}

static void malformed_target(struct ofi_node *n)
{
	uint64_t v;
	for (int i = 0; i < 6; i++) {
		memcpy(&v, n->heap + 8 * i, 8);
		EXPECT_EQ(v, 0x600d0000 + (uint64_t)i);
	}
	memcpy(&v, n->heap + 512, 8);
	EXPECT_EQ(v, 0); /* no bad entry wrote anything */
	memcpy(&v, n->heap + 256, 8);
	EXPECT_EQ(v, 0x600d0000);
}

/* ---- stalled slot -------------------------------------------------------- */
#define STALL_MS 100

/* Claims the next ring position without publishing it. */
static uint64_t claim(struct fid_xpu_ep *ep)
{
	struct fi_xpu_ofi_ep_dev *d = (struct fi_xpu_ofi_ep_dev *)(uintptr_t)ep->fid.prov_ctx;
	return __atomic_fetch_add(&d->prod, 1, __ATOMIC_ACQ_REL);
}

static void stalled_sender(struct ofi_node *n)
{
	struct fi_xpu_ofi_ep_dev *d = (struct fi_xpu_ofi_ep_dev *)(uintptr_t)n->ep[0].fid.prov_ctx;
	struct fi_xpu_ofi_wqe *ring = (struct fi_xpu_ofi_wqe *)(uintptr_t)d->ring, w;
	uint64_t *slow = (uint64_t *)n->local, *bad = slow + 1, *after = slow + 2;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	uint64_t pos;

	/* The block as providers/ofi/src/layout.rs lays it out; the host build
	 * of the device code wakes the proxy through `wake_fd`. */
	EXPECT_EQ(sizeof(struct fi_xpu_ofi_ep_dev), 384);
	EXPECT_EQ(offsetof(struct fi_xpu_ofi_ep_dev, doorbell), 320);
	EXPECT_EQ(offsetof(struct fi_xpu_ofi_ep_dev, wake_fd), 328);
	EXPECT(d->wake_fd >= 0);

	*slow = 0x510e;
	*bad = 0xbad;
	*after = 0xa17e4;
	/* A slow producer: nothing behind its slot is published, so the proxy
	 * waits for it however long it takes. */
	pos = claim(&n->ep[0]);
	usleep(4 * STALL_MS * 1000);
	EXPECT_EQ(fi_xpu_cq_read(&n->cq[0], &e, 1, FI_XPU_WORK_ITEM), -FI_EAGAIN);
	EXPECT_EQ(__atomic_load_n(&d->cons, __ATOMIC_ACQUIRE), pos);
	w = write_wqe(n, slow, 0);
	memcpy((char *)&ring[pos & (d->size - 1)] + 8, (const char *)&w + 8, sizeof(w) - 8);
	__atomic_store_n(&ring[pos & (d->size - 1)].seq, pos + 1, __ATOMIC_RELEASE);
	EXPECT_EQ(fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	EXPECT(e.op_context == slow);

	/* A buggy one: its entry carries the next lap's `seq`, and the entry
	 * behind it is published. */
	pos = claim(&n->ep[0]);
	w = write_wqe(n, bad, 8);
	memcpy((char *)&ring[pos & (d->size - 1)] + 8, (const char *)&w + 8, sizeof(w) - 8);
	__atomic_store_n(&ring[pos & (d->size - 1)].seq, pos + 1 + d->size, __ATOMIC_RELEASE);
	inject(&n->ep[0], (w = write_wqe(n, after, 16), &w));
	EXPECT_EQ(fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM), -FI_EAVAIL);
	EXPECT_EQ(fi_xpu_cq_readerr(&n->cq[0], &err, 0, FI_XPU_WORK_ITEM), 1);
	EXPECT_EQ(err.err, FI_EINVAL);
	EXPECT(err.op_context == bad);
	EXPECT_EQ(fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	EXPECT(e.op_context == after);
	EXPECT_EQ(fi_xpu_cntr_readerr(&n->cntr, FI_XPU_WORK_ITEM), 1);
	EXPECT_EQ(fi_xpu_cntr_read(&n->cntr, FI_XPU_WORK_ITEM), 2);

	/* The device API goes on with the ring. */
	CHECK(fi_xpu_write(&n->ep[0], after, 8, NULL, 0, &n->raw[0], n->peer.base + 24,
			   n->peer.key, after, FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
	EXPECT_EQ(fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	EXPECT(e.op_context == after);
	printf("stalled: slow slot served, bad slot failed after %d ms, ring goes on\n", STALL_MS);
}

static void stalled_target(struct ofi_node *n)
{
	uint64_t v;
	memcpy(&v, n->heap, 8);
	EXPECT_EQ(v, 0x510e);
	memcpy(&v, n->heap + 8, 8);
	EXPECT_EQ(v, 0); /* the skipped entry was never issued */
	memcpy(&v, n->heap + 16, 8);
	EXPECT_EQ(v, 0xa17e4);
	memcpy(&v, n->heap + 24, 8);
	EXPECT_EQ(v, 0xa17e4);
}

/* ---- cooperative scopes -------------------------------------------------- */
#define SC_GROUPS 2
#define SC_ITEMS 8
#define SC_LANES 4
#define SC_WG_BYTES (16 * 1024)
#define SC_SG_BYTES 4096
#define SC_SG_OFF (SC_GROUPS * SC_WG_BYTES)
#define SC_ATOMIC_OFF (SC_SG_OFF + SC_GROUPS * (SC_ITEMS / SC_LANES) * SC_SG_BYTES)

static struct ofi_node *scope_node;
/* In the node's local memory (the provider refuses private memory): the
 * source, then the fetched values, in memory that outlives the kernel. */
static unsigned char *scope_src;
#define scope_old ((uint64_t(*)[SC_ITEMS])(scope_src + SC_ATOMIC_OFF))

struct scope_out {
	int rc[SC_GROUPS][SC_ITEMS][3];
	uint64_t old[SC_GROUPS][SC_ITEMS];
};

static unsigned char scope_pat(size_t i)
{
	return (unsigned char)(i * 7 + i / 251 + 1);
}

static void scope_kernel(void *arg)
{
	struct scope_out *o = (struct scope_out *)arg;
	struct ofi_node *n = scope_node;
	uint32_t g = fi_xpu_arch_group_id(), item = fi_xpu_arch_local_id();
	uint32_t sg = fi_xpu_arch_subgroup_id(), nsg = SC_ITEMS / SC_LANES;
	uint64_t base = n->peer.base, key = n->peer.key, one = 1;
	size_t wg_off = (size_t)g * SC_WG_BYTES;
	size_t sg_off = SC_SG_OFF + ((size_t)g * nsg + sg) * SC_SG_BYTES;

	/* Group g talks through its own endpoint to the peer's endpoint g. */
	o->rc[g][item][0] = fi_xpu_coop_write(&n->ep[g], scope_src + wg_off, SC_WG_BYTES, NULL, 0,
					 &n->raw[g], base + wg_off, key, scope_src + wg_off,
					 FI_DELIVERY_COMPLETE,
					 FI_XPU_WORK_GROUP);
	o->rc[g][item][1] = fi_xpu_coop_write(&n->ep[g], scope_src + sg_off, SC_SG_BYTES, NULL, 0,
					 &n->raw[g], base + sg_off, key, scope_src + sg_off,
					 FI_DELIVERY_COMPLETE,
					 FI_XPU_SUBGROUP);
	/* The operand is on this work item's stack: FI_INJECT copies it. */
	o->rc[g][item][2] = fi_xpu_fetch_atomic(&n->ep[0], &one, 1, NULL, &scope_old[g][item], NULL,
						&n->raw[0], base + SC_ATOMIC_OFF, key, FI_UINT64,
						FI_SUM, &scope_node, FI_INJECT, FI_XPU_DEVICE);
	/* The results are written when the operations complete: wait for
	 * them once for the whole device (the leader flushes for everyone). */
	if (o->rc[g][item][2] == 0)
		o->rc[g][item][2] = fi_xpu_flush(&n->ep[0], 0, FI_XPU_DEVICE);
	o->old[g][item] = __atomic_load_n(&scope_old[g][item], __ATOMIC_ACQUIRE);
}

static void scopes_sender(struct ofi_node *n)
{
	static struct scope_out out;
	struct fi_xpu_host_launch_attr la = { .num_groups = SC_GROUPS, .group_size = SC_ITEMS,
					      .subgroup_size = SC_LANES, .flags = 0 };
	struct fi_xpu_ofi_ep_dev *d[2];
	uint64_t prod0[2];
	int e, want[2] = { 1 + SC_ITEMS / SC_LANES + SC_GROUPS * SC_ITEMS,
			   1 + SC_ITEMS / SC_LANES };

	scope_src = n->local;
	for (size_t i = 0; i < SC_ATOMIC_OFF; i++)
		scope_src[i] = scope_pat(i);
	for (e = 0; e < 2; e++) {
		d[e] = (struct fi_xpu_ofi_ep_dev *)(uintptr_t)n->ep[e].fid.prov_ctx;
		prod0[e] = __atomic_load_n(&d[e]->prod, __ATOMIC_ACQUIRE);
	}
	scope_node = n;
	memset(&out, 0, sizeof(out));
	CHECK(fi_xpu_host_launch(&la, scope_kernel, &out));
	for (int g = 0; g < SC_GROUPS; g++)
		for (int i = 0; i < SC_ITEMS; i++) {
			EXPECT_EQ(out.rc[g][i][0], 0);
			EXPECT_EQ(out.rc[g][i][1], 0);
			EXPECT_EQ(out.rc[g][i][2], 0);
		}
	/* One entry per work group and per subgroup (the cooperative writes),
	 * and one per work item for the atomic. */
	for (e = 0; e < 2; e++)
		EXPECT_EQ(__atomic_load_n(&d[e]->prod, __ATOMIC_ACQUIRE) - prod0[e], want[e]);
	for (e = 0; e < 2; e++) {
		for (int k = 0; k < want[e]; k++) {
			struct fi_cq_tagged_entry c;
			EXPECT_EQ(fi_xpu_cq_sread(&n->cq[e], &c, 1, 1, FI_XPU_WORK_ITEM), 1);
			if (c.op_context == &scope_node) {
				EXPECT_EQ(e, 0);
				EXPECT((c.flags & FI_ATOMIC) != 0);
			} else {
				EXPECT((unsigned char *)c.op_context >= scope_src &&
				       (unsigned char *)c.op_context < scope_src + SC_ATOMIC_OFF);
			}
		}
		struct fi_cq_tagged_entry c;
		EXPECT_EQ(fi_xpu_cq_read(&n->cq[e], &c, 1, FI_XPU_WORK_ITEM), -FI_EAGAIN);
		CHECK(fi_xpu_flush(&n->ep[e], 0, FI_XPU_WORK_ITEM));
	}
	/* Every work item fetched its own value: 0 .. N-1, each once. */
	{
		int seen[SC_GROUPS * SC_ITEMS] = { 0 };
		for (int g = 0; g < SC_GROUPS; g++)
			for (int i = 0; i < SC_ITEMS; i++) {
				EXPECT(out.old[g][i] < SC_GROUPS * SC_ITEMS);
				EXPECT_EQ(seen[out.old[g][i]]++, 0);
			}
	}
	/* A second registration of the peer, addressed by its own key (on
	 * libfabric providers that address by offset the proxy turns each
	 * address into an offset from the right base), then read back. */
	{
		uint64_t *v = &scope_old[SC_GROUPS][0], *back = v + 1;
		struct fi_cq_tagged_entry c;
		*v = 0x2e9157e2;
		EXPECT(n->peer.key2 != n->peer.key);
		CHECK(fi_xpu_write(&n->ep[1], v, 8, NULL, 0, &n->raw[1], n->peer.base2 + 40,
				   n->peer.key2, v, FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
		EXPECT_EQ(fi_xpu_cq_sread(&n->cq[1], &c, 1, 1, FI_XPU_WORK_ITEM), 1);
		EXPECT(c.op_context == v);
		CHECK(fi_xpu_read(&n->ep[1], back, 8, NULL, &n->raw[1], n->peer.base2 + 40,
				  n->peer.key2, back, 0, FI_XPU_WORK_ITEM));
		EXPECT_EQ(fi_xpu_cq_sread(&n->cq[1], &c, 1, 1, FI_XPU_WORK_ITEM), 1);
		EXPECT_EQ(*back, *v);
	}
	printf("scopes: %d + %d ring entries for %d items\n", want[0], want[1],
	       SC_GROUPS * SC_ITEMS);
}

static void scopes_target(struct ofi_node *n)
{
	uint64_t v;
	/* Checked after every write, the one to the second registration
	 * included: a write sent to the wrong registration would show here. */
	for (size_t i = 0; i < SC_ATOMIC_OFF; i++)
		if (n->heap[i] != scope_pat(i)) {
			fprintf(stderr, "scopes: byte %zu is %u\n", i, n->heap[i]);
			exit(1);
		}
	memcpy(&v, n->heap + SC_ATOMIC_OFF, 8);
	EXPECT_EQ(v, SC_GROUPS * SC_ITEMS); /* once per work item */
	memcpy(&v, n->heap2 + 40, 8);
	EXPECT_EQ(v, 0x2e9157e2);
}

/* ---- driver -------------------------------------------------------------- */
/* The mode the program was started with. */
static const char *mode;

/* The sender's and target's halves of each mode but "death"; "scopes" is
 * the last, the one a mode that matches no other runs. */
static const struct {
	const char *mode;
	void (*sender)(struct ofi_node *n);
	void (*target)(struct ofi_node *n);
} roles[] = {
	{ "flood", flood_sender, flood_target },
	{ "malformed", malformed_sender, malformed_target },
	{ "stalled", stalled_sender, stalled_target },
	{ "scopes", scopes_sender, scopes_target },
};

static int run(int sock, int rank)
{
	struct ofi_node n;
	struct ofi_opts o = { .nep = 1, .heap = 4096 };
	size_t i;

	if (!strcmp(mode, "death")) {
		o.cq_timeout_ms = DEATH_WAIT_MS;
	} else if (!strcmp(mode, "flood")) {
		o.ring = FLOOD_RING;
		o.cq_size = FLOOD_CQ;
		o.heap = 8 * FLOOD_OPS;
	} else if (!strcmp(mode, "scopes")) {
		o.nep = 2;
		o.threads = 2;
		o.heap = SC_ATOMIC_OFF + 4096;
		o.heap2 = 4096;
	} else if (!strcmp(mode, "stalled")) {
		char ms[16];
		snprintf(ms, sizeof(ms), "%d", STALL_MS);
		setenv("FI_XPU_OFI_STALL_MS", ms, 1);
	} else if (strcmp(mode, "malformed") != 0) {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	ofi_setup(&n, sock, rank, &o);
	if (!strcmp(mode, "death")) {
		uint64_t t0;
		if (rank == 1)
			victim(&n);
		survivor(&n);
		t0 = ofi_now_ms();
		ofi_teardown(&n);
		t0 = ofi_now_ms() - t0;
		printf("death: teardown %" PRIu64 " ms\n", t0);
		EXPECT(t0 < DEATH_TEARDOWN_MS);
		return 0;
	}
	for (i = 0; i + 1 < sizeof(roles) / sizeof(roles[0]); i++)
		if (!strcmp(mode, roles[i].mode))
			break;
	ofi_barrier(&n);
	if (rank == 0)
		roles[i].sender(&n);
	ofi_barrier(&n);
	if (rank == 1)
		roles[i].target(&n);
	ofi_barrier(&n);
	ofi_teardown(&n);
	return 0;
}

int main(int argc, char **argv)
{
	int sock;
	if (argc != 2)
		return 2;
	mode = argv[1];
	/* Named so that the harness can remove what libfabric's shm provider
	 * leaves behind for a process that could not clean up. */
	sock = ofi_fork_peer("ofi_stress", run, &child_pid);
	if (run(sock, 0) != 0)
		return 1;
	/* In "death" the run has killed and reaped its peer. */
	if (strcmp(mode, "death") != 0 && !ofi_peer_ok(child_pid))
		return 1;
	printf("ofi_stress %s: ok\n", mode);
	return 0;
}
