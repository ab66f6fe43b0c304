/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * One large transfer split across groups (fi_xpu_coop_write_part,
 * fi_xpu_coop_put_signal_part) between two processes (fork + socketpair)
 * on the provider OFI_COMMON_PROV names (ofi by default, or shm), kernels
 * on the host launcher at every scope, each group of the launch one part:
 *
 *   rank 0's groups each write their share of one buffer into rank 1's
 *   heap (FI_REMOTE_CQ_DATA: the part), then put their share of another
 *   with a signal add; rank 1 waits until the word reaches parts * value,
 *   then checks every byte of the put at once (a share whose signal came
 *   before its data fails), reads exactly `parts` remote CQ entries, one
 *   per part, and checks every byte of the write and the guard bytes
 *   behind both buffers. Rank 0 reads exactly 2 * parts completions, each
 *   context once, and its counter moves by 2 * parts.
 *
 * Lengths: large and not a multiple of parts * 16, smaller than
 * parts * 16 (empty shares, which still complete and signal), and 0. At
 * device scope (one part) the signal is a set, which one part may use.
 * Single-process parts on rank 0: the shares of fi_xpu_coop_part for many
 * lengths and part counts, and bad input with its exact codes.
 *
 * Prints "device_split: ok".
 */
#include "ofi_common.h"
#include "scope_index.h"

#define BIG ((size_t)1 << 20)
#define GUARD 64
/* Offsets in rank 1's registered heap. */
#define WDATA 0
#define PDATA (WDATA + BIG + GUARD)
#define SIGW (PDATA + BIG + GUARD)
#define HEAP (SIGW + 64)
/* Offsets in rank 0's local memory. */
#define WSRC 0
#define PSRC (WSRC + BIG)
#define LOCAL (PSRC + BIG)
#define WAIT_MS 20000
#define VALUE 3
#define MAXI 64
#define WCTX 0x10000u
#define PCTX 0x20000u
#define RDATA 0x5000u

struct env {
	struct ofi_node *n;
	int scope;
	size_t len;
	uint32_t parts;
	int fails;
	int rc[MAXI][2];
};

static unsigned char pat(int which, size_t k)
{
	return (unsigned char)(k * 131u + (k >> 9) * 7u + (unsigned)which * 101u + 1u);
}

static void fail(struct env *e, const char *what, int64_t got)
{
	fprintf(stderr, "[rank %d] scope %d, %zu bytes in %u parts: %s: %lld\n", e->n->rank,
		e->scope, e->len, e->parts, what, (long long)got);
	__atomic_fetch_add(&e->fails, 1, __ATOMIC_RELAXED);
}

static void initiator(void *arg)
{
	struct env *e = (struct env *)arg;
	struct ofi_node *n = e->n;
	int s = e->scope;
	uint32_t i = fi_xpu_arch_scope_rank(FI_XPU_DEVICE), part = scope_index(s);
	uint64_t base = n->peer.base, key = n->peer.key;
	void *peer = &n->raw[0];
	/* One part: a set may stand in for the add. */
	int op = e->parts == 1 ? FI_XPU_SIGNAL_SET : FI_XPU_SIGNAL_ADD;

	RETRY(e->rc[i][0],
	      fi_xpu_coop_write_part(&n->ep[0], n->local + WSRC, e->len, NULL, RDATA + part, peer,
				     base + WDATA, key, (void *)(uintptr_t)(WCTX + part),
				     FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA, part, e->parts, s));
	RETRY(e->rc[i][1],
	      fi_xpu_coop_put_signal_part(&n->ep[0], n->local + PSRC, e->len, NULL, peer,
					  base + PDATA, key, base + SIGW, key, VALUE, op,
					  (void *)(uintptr_t)(PCTX + part), 0, part, e->parts, s));
}

static void check_bytes(struct env *e, const unsigned char *got, int which, const char *what)
{
	for (size_t k = 0; k < e->len; k++)
		if (got[k] != pat(which, k)) {
			fail(e, what, (int64_t)k);
			return;
		}
	for (size_t k = e->len; k < e->len + GUARD; k++)
		if (got[k] != 0xee) {
			fail(e, "a guard byte behind the buffer was written, byte", (int64_t)k);
			return;
		}
}

/* The whole launch waits together for every share's signal. */
static void target(void *arg)
{
	struct env *e = (struct env *)arg;
	struct ofi_node *n = e->n;
	int rc = fi_xpu_signal_wait_until(&n->ep[0], (uint64_t *)(void *)(n->heap + SIGW),
					  FI_XPU_CMP_GE, (uint64_t)e->parts * VALUE, WAIT_MS,
					  FI_XPU_WORK_GROUP);
	if (rc)
		fail(e, "signal wait", rc);
	else if (fi_xpu_arch_scope_rank(FI_XPU_DEVICE) == 0)
		check_bytes(e, n->heap + PDATA, 1, "put data missing after its signals, byte");
}

/* Reads completions of rank 0's CQ until `count` came (no more after). */
static void drain(struct env *e)
{
	struct fi_cq_tagged_entry c[16];
	uint64_t got = 0, want = 2ULL * e->parts, t0 = ofi_now_ms();
	uint32_t seen[2][MAXI];
	int64_t k;

	memset(seen, 0, sizeof(seen));
	while (got < want) {
		k = fi_xpu_cq_read(&e->n->cq[0], c, 16, FI_XPU_WORK_ITEM);
		if (k == -FI_EAGAIN) {
			if (ofi_now_ms() - t0 > WAIT_MS) {
				fail(e, "completions missing, had", (int64_t)got);
				return;
			}
			continue;
		}
		ofi_no_error_entry(&e->n->cq[0], k);
		for (int64_t j = 0; j < k; j++) {
			uintptr_t ctx = (uintptr_t)c[j].op_context;
			int put = ctx >= PCTX;
			uint32_t part = (uint32_t)(ctx - (put ? PCTX : WCTX));
			if (ctx < WCTX || part >= e->parts || seen[put][part]++)
				fail(e, "a completion not of one part, context", (int64_t)ctx);
			if (c[j].flags != (FI_RMA | FI_WRITE))
				fail(e, "completion flags", (int64_t)c[j].flags);
		}
		got += (uint64_t)k;
	}
	EXPECT_EQ(fi_xpu_cq_read(&e->n->cq[0], c, 16, FI_XPU_WORK_ITEM), -FI_EAGAIN);
}

/* Rank 1's remote CQ: one entry per written share, with its part. */
static void remote_entries(struct env *e)
{
	struct fi_cq_tagged_entry c[16];
	uint32_t seen[MAXI], got = 0;
	uint64_t t0 = ofi_now_ms();
	int64_t k;

	memset(seen, 0, sizeof(seen));
	while (got < e->parts) {
		k = fi_xpu_cq_read(&e->n->cq[0], c, 16, FI_XPU_WORK_ITEM);
		if (k == -FI_EAGAIN) {
			if (ofi_now_ms() - t0 > WAIT_MS) {
				fail(e, "remote entries missing, had", got);
				return;
			}
			continue;
		}
		ofi_no_error_entry(&e->n->cq[0], k);
		for (int64_t j = 0; j < k; j++) {
			uint64_t part = c[j].data - RDATA;
			if (!(c[j].flags & FI_REMOTE_CQ_DATA) || part >= e->parts || seen[part]++)
				fail(e, "a remote entry not of one part, data", (int64_t)c[j].data);
		}
		got += (uint32_t)k;
	}
	EXPECT_EQ(fi_xpu_cq_read(&e->n->cq[0], c, 16, FI_XPU_WORK_ITEM), -FI_EAGAIN);
}

static int run_case(struct ofi_node *n, int scope, size_t len, uint32_t groups, uint32_t items,
		    uint32_t lanes)
{
	static struct env e;
	struct fi_xpu_host_launch_attr attr = { groups, items, lanes, 0 };
	uint32_t total = groups * items;
	uint64_t cntr0 = 0;
	int ret;

	memset(&e, 0, sizeof(e));
	e.n = n;
	e.scope = scope;
	e.len = len;
	e.parts = scope_count(scope, groups, items, lanes);
	EXPECT(e.parts <= MAXI && total <= MAXI);
	if (n->rank == 1) {
		memset(n->heap, 0, HEAP);
		memset(n->heap + WDATA, 0xee, BIG + GUARD);
		memset(n->heap + PDATA, 0xee, BIG + GUARD);
	} else {
		cntr0 = fi_xpu_cntr_read(&n->cntr, FI_XPU_WORK_ITEM);
	}
	ofi_barrier(n);
	if (n->rank == 0) {
		ret = fi_xpu_host_launch(&attr, initiator, &e);
		if (ret)
			fail(&e, "fi_xpu_host_launch", ret);
		for (uint32_t i = 0; i < total; i++)
			for (int k = 0; k < 2; k++)
				if (e.rc[i][k] != 0)
					fail(&e, k ? "fi_xpu_coop_put_signal_part" : "fi_xpu_coop_write_part",
					     e.rc[i][k]);
		drain(&e);
		ret = fi_xpu_cntr_wait_status(&n->cntr, cntr0 + 2ULL * e.parts, WAIT_MS,
					      FI_XPU_WORK_ITEM);
		if (ret)
			fail(&e, "counter wait", ret);
		if (fi_xpu_cntr_read(&n->cntr, FI_XPU_WORK_ITEM) != cntr0 + 2ULL * e.parts)
			fail(&e, "counter moved by",
			     (int64_t)(fi_xpu_cntr_read(&n->cntr, FI_XPU_WORK_ITEM) - cntr0));
	} else {
		struct fi_xpu_host_launch_attr one = { 1, 4, 0, 0 };
		ret = fi_xpu_host_launch(&one, target, &e);
		if (ret)
			fail(&e, "fi_xpu_host_launch", ret);
		remote_entries(&e);
		check_bytes(&e, n->heap + WDATA, 0, "written data, byte");
	}
	ofi_barrier(n); /* every completion was read: nothing more comes */
	if (n->rank == 1) {
		uint64_t w = *(volatile uint64_t *)(void *)(n->heap + SIGW);
		if (w != (uint64_t)e.parts * VALUE)
			fail(&e, "signal word", (int64_t)w);
	}
	return e.fails;
}

/* The shares of fi_xpu_coop_part, against what they must be: in order,
 * together exactly [0, len), offsets multiples of 16, sizes within one
 * unit of each other, empty ones only past the last unit. */
static void shares(void)
{
	size_t off, n;
	EXPECT_EQ(fi_xpu_coop_part(100, 0, 0, &off, &n), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_coop_part(100, 3, 3, &off, &n), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_coop_part(100, UINT32_MAX, 3, &off, &n), -FI_EINVAL);
	for (size_t len = 0; len < 700; len += len < 70 ? 1 : 13)
		for (uint32_t parts = 1; parts <= 45; parts++) {
			size_t end = 0, lo = (size_t)-1, hi = 0;
			for (uint32_t p = 0; p < parts; p++) {
				EXPECT_EQ(fi_xpu_coop_part(len, p, parts, &off, &n), 0);
				EXPECT(off == end && (off % 16 == 0 || n == 0));
				if (n == 0) {
					EXPECT(off == len && len <= (size_t)(parts - 1) * 16);
				} else {
					lo = n < lo ? n : lo;
					hi = n > hi ? n : hi;
				}
				end = off + n;
			}
			EXPECT(end == len && (hi == 0 || hi - lo < 32));
		}
	/* A very large transfer: 16-byte units, nothing lost. */
	{
		size_t len = ((size_t)1 << 40) + 5, end = 0;
		for (uint32_t p = 0; p < 132; p++) {
			EXPECT_EQ(fi_xpu_coop_part(len, p, 132, &off, &n), 0);
			EXPECT(off == end && off % 16 == 0 && n > 0);
			end = off + n;
		}
		EXPECT(end == len);
	}
}

/* Bad input, each with its code, on a single work item and in a group:
 * nothing is issued. */
static void bad_input(struct ofi_node *n)
{
	struct fid_xpu_ep *ep = &n->ep[0];
	struct fid_xpu_ep *as_ep = (struct fid_xpu_ep *)(void *)&n->cq[0];
	uint64_t base = n->peer.base, key = n->peer.key, cntr0;
	void *peer = &n->raw[0];
	unsigned char *src = n->local + WSRC;
	struct fi_cq_tagged_entry c;
	const int W = FI_XPU_WORK_ITEM, A = FI_XPU_SIGNAL_ADD, S = FI_XPU_SIGNAL_SET;

	cntr0 = fi_xpu_cntr_read(&n->cntr, W);
	/* The split write; e: the endpoint, then flags, part, parts, scope. */
#define WRITE_PART(e, f, part, parts, scope)                                                   \
	fi_xpu_coop_write_part(e, src, 64, NULL, 0, peer, base, key, NULL, f, part, parts, scope)
	EXPECT_EQ(WRITE_PART(NULL, 0, 0, 2, W), -FI_EINVAL);
	EXPECT_EQ(WRITE_PART(as_ep, 0, 0, 2, W), -FI_EINVAL);
	EXPECT_EQ(WRITE_PART(ep, 0, 0, 2, 9), -FI_EINVAL);
	EXPECT_EQ(WRITE_PART(ep, 1ULL << 62, 0, 2, W), -FI_EBADFLAGS);
	EXPECT_EQ(WRITE_PART(ep, 0, 2, 2, W), -FI_EINVAL);
	EXPECT_EQ(WRITE_PART(ep, 0, 7, 2, W), -FI_EINVAL);
	EXPECT_EQ(WRITE_PART(ep, 0, 0, 0, W), -FI_EINVAL);
#undef WRITE_PART
	/* The split put-with-signal (a set cannot be counted over parts); the
	 * signal word's offset and operation, then as above. */
#define SIGNAL_PART(e, sig, op, f, part, parts, scope)                                         \
	fi_xpu_coop_put_signal_part(e, src, 64, NULL, peer, base, key, base + (sig), key, 1, op, \
				    NULL, f, part, parts, scope)
	EXPECT_EQ(SIGNAL_PART(ep, SIGW, S, 0, 0, 2, W), -FI_EINVAL);
	EXPECT_EQ(SIGNAL_PART(ep, SIGW, S, 0, 1, 2, W), -FI_EINVAL);
	EXPECT_EQ(SIGNAL_PART(ep, SIGW, A, 0, 2, 2, W), -FI_EINVAL);
	EXPECT_EQ(SIGNAL_PART(ep, SIGW, A, 0, 0, 0, W), -FI_EINVAL);
	EXPECT_EQ(SIGNAL_PART(NULL, SIGW, A, 0, 0, 2, W), -FI_EINVAL);
	EXPECT_EQ(SIGNAL_PART(as_ep, SIGW, A, 0, 0, 2, W), -FI_EINVAL);
	EXPECT_EQ(SIGNAL_PART(ep, SIGW, A, 0, 0, 2, -1), -FI_EINVAL);
	EXPECT_EQ(SIGNAL_PART(ep, SIGW, A, FI_INJECT, 0, 2, W), -FI_EBADFLAGS);
	EXPECT_EQ(SIGNAL_PART(ep, SIGW + 4, A, 0, 0, 2, W), -FI_EINVAL);
	EXPECT_EQ(SIGNAL_PART(ep, SIGW, 2, 0, 0, 1, W), -FI_EINVAL);
#undef SIGNAL_PART
	/* the group form of put-with-signal, alone */
#define SIGNAL_GROUP(e, f, scope)                                                              \
	fi_xpu_coop_put_signal(e, src, 64, NULL, peer, base, key, base + SIGW, key, 1, A, NULL, f, \
			       scope)
	EXPECT_EQ(SIGNAL_GROUP(ep, FI_REMOTE_CQ_DATA, W), -FI_EBADFLAGS);
	EXPECT_EQ(SIGNAL_GROUP(as_ep, 0, W), -FI_EINVAL);
	EXPECT_EQ(SIGNAL_GROUP(ep, 0, FI_XPU_DEVICE + 1), -FI_EINVAL);
#undef SIGNAL_GROUP
	/* Nothing was issued. */
	EXPECT_EQ(fi_xpu_quiet(ep, 0, W), 0);
	EXPECT_EQ(fi_xpu_cq_read(&n->cq[0], &c, 1, W), -FI_EAGAIN);
	EXPECT_EQ(fi_xpu_cntr_read(&n->cntr, W), cntr0);
}

/* Every member of a group gets the refusal. */
static void bad_in_group(void *arg)
{
	struct ofi_node *n = (struct ofi_node *)arg;
	int rc = fi_xpu_coop_put_signal_part(&n->ep[0], n->local, 64, NULL, &n->raw[0],
					     n->peer.base, n->peer.key, n->peer.base + SIGW,
					     n->peer.key, 1, FI_XPU_SIGNAL_SET, NULL, 0,
					     fi_xpu_arch_group_id(), 2, FI_XPU_WORK_GROUP);
	if (rc != -FI_EINVAL) {
		fprintf(stderr, "SIGNAL_SET over 2 parts in a group: %d\n", rc);
		exit(1);
	}
}

static int run(int sock, int rank)
{
	struct ofi_opts o = { .nep = 1, .ring = 256, .cq_size = 1024, .heap = HEAP,
			      .local = LOCAL };
	static const uint32_t shape[3] = { 7, 8, 4 };
	const size_t lens[] = { BIG - 37, 40, 0 };
	struct ofi_node n;
	int bad = 0;

	ofi_setup(&n, sock, rank, &o);
	if (rank == 0) {
		struct fi_xpu_host_launch_attr two = { 2, 4, 0, 0 };
		for (size_t k = 0; k < BIG; k++) {
			n.local[WSRC + k] = pat(0, k);
			n.local[PSRC + k] = pat(1, k);
		}
		shares();
		bad_input(&n);
		EXPECT_EQ(fi_xpu_host_launch(&two, bad_in_group, &n), 0);
	}
	ofi_barrier(&n);
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
		for (int scope = FI_XPU_WORK_ITEM; scope <= FI_XPU_DEVICE; scope++)
			bad += run_case(&n, scope, lens[l], shape[0], shape[1], shape[2]);
	ofi_barrier(&n);
	ofi_teardown(&n);
	return bad;
}

int main(void)
{
	alarm(240);
	return ofi_pair_main("device_split", NULL, run);
}
