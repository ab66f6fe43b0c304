/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The ordered-signalling extensions between two processes (fork +
 * socketpair) on the provider OFI_COMMON_PROV names (ofi by default, or
 * shm), kernels on the host launcher at every scope:
 *
 *   put-with-signal  rank 0's work items each write their own slot per
 *                    round and signal their own word (ADD 1 in even rounds,
 *                    SET round+1 in odd ones); rank 1's work items wait on
 *                    their word (>= or ==) and check every byte of the slot
 *                    at once: a signal seen before its data fails. Each
 *                    group's leader also puts one summary with a SET
 *                    signal, which rank 1's groups wait on at the scope,
 *                    every member checking the summary.
 *   fence            write; fi_xpu_fence; an atomic that sets a flag: the
 *                    flag is seen only with the written data.
 *   quiet            writes, a launch-wide barrier, fi_xpu_quiet: then
 *                    every operation of the endpoint counted complete.
 *   timeouts         a wait that cannot succeed ends with -FI_ETIMEDOUT for
 *                    every member.
 * Single-process parts on rank 0: the comparison table, the direct pointer
 * (non-NULL on shm, where the data goes through it, NULL on ofi), and bad
 * input with its exact codes. The testing-only delays of each provider
 * (FI_XPU_SHM_TEST_DELAY_US, FI_XPU_OFI_TEST_DELAY_MS) make a signal that
 * overtakes its data show.
 *
 * Prints "device_signal: ok".
 */
#include "ofi_common.h"
#include "scope_index.h"

#include <sys/socket.h>
#include <sys/wait.h>

#define ROUNDS 4
#define MAXI 64
#define LEN 256
#define HEAP (256 * 1024)
/* Offsets in rank 1's registered heap. */
#define DATA 0 /* ROUNDS * MAXI slots of LEN */
#define ADDW (DATA + ROUNDS * MAXI * LEN)
#define SETW (ADDW + MAXI * 8) /* SET words: one per round and item */
#define GW (SETW + ROUNDS * MAXI * 8)
#define GDATA (GW + MAXI * 8) /* 64 bytes per group */
#define FLAG (GDATA + MAXI * 64)
#define FDATA (FLAG + MAXI * 8)
#define QDATA (FDATA + MAXI * LEN)
#define PTRW (QDATA + MAXI * LEN)
#define PTRD (PTRW + 64)
#define LOCALW (PTRD + 64) /* rank 0's own words */
#define END (LOCALW + 64)
/* Offsets in rank 0's local (allocated) memory. */
#define SRC 0 /* ROUNDS * MAXI slots of LEN */
#define GSRC (SRC + ROUNDS * MAXI * LEN)
#define FSRC (GSRC + MAXI * 64)
#define SEVEN (FSRC + MAXI * LEN)
#define LOCAL_END (SEVEN + 64)
#define WAIT_MS 10000
#define GROUP_SIGNAL 0xfeedULL

struct env {
	struct ofi_node *n;
	int scope, rank;
	uint32_t groups, items, lanes;
	uint64_t cntr0, expect_ops;
	int fails;
	int64_t rc[MAXI][ROUNDS + 8];
	uint64_t after_quiet[MAXI];
};

static unsigned char pat(uint32_t r, uint32_t i, size_t k)
{
	return (unsigned char)(r * 31u + i * 7u + (uint32_t)k * 13u + 1u);
}

static void fail(struct env *e, const char *what, uint32_t item, int64_t got)
{
	fprintf(stderr, "[rank %d] scope %d (%u x %u, subgroup %u): %s: work item %u: %lld\n",
		e->rank, e->scope, e->groups, e->items, e->lanes, what, item, (long long)got);
	__atomic_fetch_add(&e->fails, 1, __ATOMIC_RELAXED);
}

static int leader(int scope)
{
	return scope == FI_XPU_WORK_ITEM || fi_xpu_arch_scope_rank(scope) == 0;
}

static void initiator(void *arg)
{
	struct env *e = (struct env *)arg;
	struct ofi_node *n = e->n;
	int s = e->scope;
	uint32_t i = fi_xpu_arch_scope_rank(FI_XPU_DEVICE), inst = scope_index(s);
	uint64_t base = n->peer.base, key = n->peer.key;
	void *peer = &n->raw[0];
	int64_t *rc = e->rc[i];

	/* Fence first, while nothing else is in flight: the flag is set
	 * after the data is placed. */
	RETRY(rc[ROUNDS + 1], fi_xpu_write(&n->ep[0], n->local + FSRC + (size_t)i * LEN, LEN, NULL,
					    0, peer, base + FDATA + i * LEN, key, NULL, 0, s));
	RETRY(rc[ROUNDS + 2], fi_xpu_fence(&n->ep[0], 0, s));
	RETRY(rc[ROUNDS + 3], fi_xpu_atomic(&n->ep[0], n->local + SEVEN, 1, NULL, peer,
					     base + FLAG + i * 8, key, FI_UINT64, FI_ATOMIC_WRITE,
					     NULL, 0, s));
	for (uint32_t r = 0; r < ROUNDS; r++) {
		uint64_t slot = base + DATA + ((uint64_t)r * MAXI + i) * LEN;
		const unsigned char *src = n->local + SRC + ((size_t)r * MAXI + i) * LEN;
		if (r % 2 == 0)
			RETRY(rc[r], fi_xpu_put_signal(&n->ep[0], src, LEN, NULL, peer, slot, key,
							base + ADDW + i * 8, key, 1, FI_XPU_SIGNAL_ADD,
							NULL, 0, s));
		else
			RETRY(rc[r], fi_xpu_put_signal(&n->ep[0], src, LEN, NULL, peer, slot, key,
							base + SETW + ((uint64_t)r * MAXI + i) * 8, key, r + 1,
							FI_XPU_SIGNAL_SET, NULL, 0, s));
	}
	/* One summary per group, at work-item scope by its leader. */
	if (leader(s))
		RETRY(rc[ROUNDS], fi_xpu_put_signal(
			&n->ep[0], n->local + GSRC + inst * 64, 64, NULL, peer,
			base + GDATA + inst * 64, key, base + GW + inst * 8, key, GROUP_SIGNAL,
			FI_XPU_SIGNAL_SET, NULL, FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
	/* Quiet: everything posted by anyone before it is complete after it. */
	RETRY(rc[ROUNDS + 4], fi_xpu_write(&n->ep[0], n->local + FSRC + (size_t)i * LEN, LEN, NULL,
					    0, peer, base + QDATA + i * LEN, key, NULL, 0, s));
	fi_xpu_arch_barrier(FI_XPU_DEVICE);
	rc[ROUNDS + 5] = fi_xpu_quiet(&n->ep[0], 0, s);
	e->after_quiet[i] = fi_xpu_cntr_read(&n->cntr, FI_XPU_WORK_ITEM);
}

static void check_bytes(struct env *e, const unsigned char *got, uint32_t r, uint32_t i,
			size_t len, const char *what)
{
	for (size_t k = 0; k < len; k++)
		if (got[k] != pat(r, i, k)) {
			fail(e, what, i, (int64_t)k);
			return;
		}
}

static void target(void *arg)
{
	struct env *e = (struct env *)arg;
	struct ofi_node *n = e->n;
	int s = e->scope;
	uint32_t i = fi_xpu_arch_scope_rank(FI_XPU_DEVICE), inst = scope_index(s);
	unsigned char *h = n->heap;
	int64_t *rc = e->rc[i];

	rc[ROUNDS + 2] = fi_xpu_signal_wait_until(&n->ep[0], (uint64_t *)(h + FLAG + i * 8),
						  FI_XPU_CMP_EQ, 7, WAIT_MS, FI_XPU_WORK_ITEM);
	check_bytes(e, h + FDATA + (size_t)i * LEN, 200, i, LEN, "fenced data missing, byte");
	for (uint32_t r = 0; r < ROUNDS; r++) {
		if (r % 2 == 0)
			rc[r] = fi_xpu_signal_wait_until(&n->ep[0], (uint64_t *)(h + ADDW + i * 8),
							 FI_XPU_CMP_GE, r / 2 + 1, WAIT_MS,
							 FI_XPU_WORK_ITEM);
		else
			rc[r] = fi_xpu_signal_wait_until(&n->ep[0], (uint64_t *)(h + SETW + ((size_t)r * MAXI + i) * 8),
							 FI_XPU_CMP_EQ, r + 1, WAIT_MS,
							 FI_XPU_WORK_ITEM);
		/* At once: the data must be there with its signal. */
		check_bytes(e, h + DATA + ((size_t)r * MAXI + i) * LEN, r, i, LEN,
			    "data missing after its signal, byte");
	}
	/* The group waits together; every member then sees the summary. */
	rc[ROUNDS] = fi_xpu_signal_wait_until(&n->ep[0], (uint64_t *)(h + GW + inst * 8),
					      FI_XPU_CMP_EQ, GROUP_SIGNAL, WAIT_MS, s);
	check_bytes(e, h + GDATA + inst * 64, 100, inst, 64, "group summary missing, byte");
	/* Nobody sets it to this: every member times out. */
	rc[ROUNDS + 1] = fi_xpu_signal_wait_until(&n->ep[0], (uint64_t *)(h + GW + inst * 8),
						  FI_XPU_CMP_EQ, 0xdead, 20, s);
}

static int64_t want_rc(int rank, int k)
{
	if (rank == 1 && k == ROUNDS + 1)
		return -FI_ETIMEDOUT;
	return 0;
}

/* Reads `count` completions of rank 0's CQ: all successes. */
static void drain(struct env *e, uint64_t count)
{
	struct fi_cq_tagged_entry c[16];
	uint64_t got = 0, t0 = ofi_now_ms();
	while (got < count) {
		int64_t k = fi_xpu_cq_read(&e->n->cq[0], c, 16, FI_XPU_WORK_ITEM);
		if (k > 0) {
			got += (uint64_t)k;
			continue;
		}
		if (k != -FI_EAGAIN) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			(void)fi_xpu_cq_readerr(&e->n->cq[0], &err, 0, FI_XPU_WORK_ITEM);
			fail(e, "completion error", 0, -err.err);
			return;
		}
		if (ofi_now_ms() - t0 > WAIT_MS) {
			fail(e, "completions missing, had", 0, (int64_t)got);
			return;
		}
	}
}

/* Whether launch position `i` leads its group at `scope`. */
static int leader_item(int scope, uint32_t i, uint32_t items, uint32_t lanes)
{
	switch (scope) {
	case FI_XPU_SUBGROUP:
		return (i % items) % lanes == 0;
	case FI_XPU_WORK_GROUP:
		return i % items == 0;
	case FI_XPU_DEVICE:
		return i == 0;
	default:
		return 1;
	}
}

static int run_scope(struct ofi_node *n, int scope, uint32_t groups, uint32_t items,
		     uint32_t lanes)
{
	static struct env e;
	struct fi_xpu_host_launch_attr attr = { groups, items, lanes, 0 };
	uint32_t total = groups * items, ninst = scope_count(scope, groups, items, lanes);
	int ret;

	memset(&e, 0, sizeof(e));
	e.n = n;
	e.scope = scope;
	e.rank = n->rank;
	e.groups = groups;
	e.items = items;
	e.lanes = lanes;
	if (n->rank == 1) {
		memset(n->heap, 0, END);
	} else {
		for (uint32_t r = 0; r < ROUNDS; r++)
			for (uint32_t i = 0; i < MAXI; i++)
				for (size_t k = 0; k < LEN; k++)
					n->local[SRC + ((size_t)r * MAXI + i) * LEN + k] = pat(r, i, k);
		for (uint32_t g = 0; g < MAXI; g++)
			for (size_t k = 0; k < 64; k++)
				n->local[GSRC + g * 64 + k] = pat(100, g, k);
		for (uint32_t i = 0; i < MAXI; i++)
			for (size_t k = 0; k < LEN; k++)
				n->local[FSRC + (size_t)i * LEN + k] = pat(200, i, k);
		n->local[SEVEN] = 7;
		e.cntr0 = fi_xpu_cntr_read(&n->cntr, FI_XPU_WORK_ITEM);
		/* rounds, summaries, fenced writes and flags, quiet writes */
		e.expect_ops = (uint64_t)total * ROUNDS + ninst + 3ULL * total;
	}
	ofi_barrier(n);
	ret = fi_xpu_host_launch(&attr, n->rank == 0 ? initiator : target, &e);
	if (ret)
		fail(&e, "fi_xpu_host_launch", 0, ret);
	for (uint32_t i = 0; i < total; i++)
		for (int k = 0; k < ROUNDS + 6; k++) {
			int used = n->rank == 0 ? (k != ROUNDS || leader_item(scope, i, items, lanes))
						: k < ROUNDS + 3;
			if (used && e.rc[i][k] != want_rc(n->rank, k))
				fail(&e, "return value of step", i, k * 1000 + e.rc[i][k]);
		}
	if (n->rank == 0) {
		for (uint32_t i = 0; i < total; i++)
			if (e.after_quiet[i] < e.cntr0 + e.expect_ops)
				fail(&e, "operations not complete after fi_xpu_quiet", i,
				     (int64_t)(e.after_quiet[i] - e.cntr0));
		drain(&e, e.expect_ops);
	}
	ofi_barrier(n);
	if (n->rank == 1)
		for (uint32_t i = 0; i < total; i++)
			check_bytes(&e, n->heap + QDATA + (size_t)i * LEN, 200, i, LEN,
				    "quiet data, byte");
	return e.fails;
}

/* Every comparison against a local word, true and false (timeout 0). */
static void comparisons(struct ofi_node *n)
{
	static const struct {
		int cmp;
		uint64_t value;
		int64_t want;
	} t[] = {
		{ FI_XPU_CMP_EQ, 5, 0 }, { FI_XPU_CMP_EQ, 4, -FI_ETIMEDOUT },
		{ FI_XPU_CMP_NE, 4, 0 }, { FI_XPU_CMP_NE, 5, -FI_ETIMEDOUT },
		{ FI_XPU_CMP_GT, 4, 0 }, { FI_XPU_CMP_GT, 5, -FI_ETIMEDOUT },
		{ FI_XPU_CMP_GE, 5, 0 }, { FI_XPU_CMP_GE, 6, -FI_ETIMEDOUT },
		{ FI_XPU_CMP_LT, 6, 0 }, { FI_XPU_CMP_LT, 5, -FI_ETIMEDOUT },
		{ FI_XPU_CMP_LE, 5, 0 }, { FI_XPU_CMP_LE, 4, -FI_ETIMEDOUT },
		/* unsigned: UINT64_MAX is the largest */
		{ FI_XPU_CMP_LT, UINT64_MAX, 0 }, { FI_XPU_CMP_GT, UINT64_MAX, -FI_ETIMEDOUT },
	};
	uint64_t *w = (uint64_t *)(void *)(n->heap + LOCALW);
	*w = 5;
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++)
		EXPECT_EQ(fi_xpu_signal_wait_until(&n->ep[0], w, t[k].cmp, t[k].value, 0,
						   FI_XPU_WORK_ITEM),
			  t[k].want);
}

/* Bad input, each with its code, on a single work item. */
static void bad_input(struct ofi_node *n, int shm)
{
	struct fid_xpu_ep *ep = &n->ep[0];
	struct fid_xpu_ep *as_ep = (struct fid_xpu_ep *)(void *)&n->cq[0];
	uint64_t base = n->peer.base, key = n->peer.key;
	void *peer = &n->raw[0];
	unsigned char *src = n->local + SRC;
	uint64_t *w = (uint64_t *)(void *)(n->heap + LOCALW);
	const int W = FI_XPU_WORK_ITEM;

	/* put-with-signal */
	EXPECT_EQ(fi_xpu_put_signal(NULL, src, 8, NULL, peer, base, key, base + PTRW, key, 1,
				    FI_XPU_SIGNAL_SET, NULL, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_put_signal(as_ep, src, 8, NULL, peer, base, key, base + PTRW, key, 1,
				    FI_XPU_SIGNAL_SET, NULL, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_put_signal(ep, src, 8, NULL, peer, base, key, base + PTRW, key, 1,
				    FI_XPU_SIGNAL_SET, NULL, 0, 9), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_put_signal(ep, src, 8, NULL, peer, base, key, base + PTRW, key, 1,
				    FI_XPU_SIGNAL_SET, NULL, FI_INJECT, W), -FI_EBADFLAGS);
	EXPECT_EQ(fi_xpu_put_signal(ep, src, 8, NULL, peer, base, key, base + PTRW, key, 1,
				    FI_XPU_SIGNAL_SET, NULL, FI_REMOTE_CQ_DATA, W), -FI_EBADFLAGS);
	EXPECT_EQ(fi_xpu_put_signal(ep, src, 8, NULL, peer, base, key, base + PTRW, key, 1,
				    FI_XPU_SIGNAL_SET, NULL, 1ULL << 62, W), -FI_EBADFLAGS);
	EXPECT_EQ(fi_xpu_put_signal(ep, src, 8, NULL, peer, base, key, base + PTRW + 4, key, 1,
				    FI_XPU_SIGNAL_SET, NULL, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_put_signal(ep, src, 8, NULL, peer, base, key, base + PTRW, key, 1, 2,
				    NULL, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_put_signal(ep, src, 8, NULL, peer, base, key, base + PTRW, key, 1, -1,
				    NULL, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_put_signal(ep, NULL, 8, NULL, peer, base, key, base + PTRW, key, 1,
				    FI_XPU_SIGNAL_SET, NULL, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_put_signal(ep, src, 8, NULL, NULL, base, key, base + PTRW, key, 1,
				    FI_XPU_SIGNAL_SET, NULL, 0, W), -FI_EINVAL);
	/* fence and quiet */
	EXPECT_EQ(fi_xpu_fence(NULL, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_fence(as_ep, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_fence(ep, 0, 9), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_fence(ep, 1, W), -FI_EBADFLAGS);
	EXPECT_EQ(fi_xpu_quiet(NULL, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_quiet(as_ep, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_quiet(ep, 0, 9), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_quiet(ep, FI_COMPLETION, W), -FI_EBADFLAGS);
	/* waits */
	EXPECT_EQ(fi_xpu_signal_wait_until(NULL, w, FI_XPU_CMP_EQ, 0, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_signal_wait_until(as_ep, w, FI_XPU_CMP_EQ, 0, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_signal_wait_until(ep, w, FI_XPU_CMP_EQ, 0, 0, 9), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_signal_wait_until(ep, NULL, FI_XPU_CMP_EQ, 0, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_signal_wait_until(ep, (uint64_t *)(void *)((char *)w + 4), FI_XPU_CMP_EQ,
					   0, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_signal_wait_until(ep, w, FI_XPU_CMP_LE + 1, 0, 0, W), -FI_EINVAL);
	EXPECT_EQ(fi_xpu_signal_wait_until(ep, w, -1, 0, 0, W), -FI_EINVAL);
	/* direct pointers: never one for what the key does not cover */
	EXPECT(fi_xpu_peer_ptr(NULL, peer, base + PTRD, key, 64) == NULL);
	EXPECT(fi_xpu_peer_ptr(as_ep, peer, base + PTRD, key, 64) == NULL);
	EXPECT(fi_xpu_peer_ptr(ep, NULL, base + PTRD, key, 64) == NULL);
	EXPECT(fi_xpu_peer_ptr(ep, peer, base + PTRD, key + 1, 64) == NULL);
	EXPECT(fi_xpu_peer_ptr(ep, peer, base + HEAP - 32, key, 64) == NULL);
	EXPECT(fi_xpu_peer_ptr(ep, peer, base - 8, key, 64) == NULL);
	EXPECT((fi_xpu_peer_ptr(ep, peer, base + PTRD, key, 64) != NULL) == shm);
	if (shm) {
		/* A signal word behind a key that does not grant it: an error
		 * completion, nothing written. */
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		uint64_t t0 = ofi_now_ms();
		int64_t k;
		EXPECT_EQ(fi_xpu_put_signal(ep, src, 8, NULL, peer, base + PTRD, key, base + PTRW,
					    key + 1, 1, FI_XPU_SIGNAL_SET, (void *)0x51, 0, W), 0);
		while ((k = fi_xpu_cq_read(&n->cq[0], &c, 1, W)) == -FI_EAGAIN &&
		       ofi_now_ms() - t0 < WAIT_MS)
			;
		EXPECT_EQ(k, -FI_EAVAIL);
		EXPECT_EQ(fi_xpu_cq_readerr(&n->cq[0], &err, 0, W), 1);
		EXPECT_EQ(err.err, FI_EACCES);
		EXPECT(err.op_context == (void *)0x51);
	}
}

/* Rank 0 stores through the direct pointer (shm) and raises a signal with
 * a put of no data; rank 1 sees the bytes once the signal arrives. */
static void pointer(struct ofi_node *n, int shm)
{
	if (n->rank == 0) {
		unsigned char *p = (unsigned char *)fi_xpu_peer_ptr(
			&n->ep[0], &n->raw[0], n->peer.base + PTRD, n->peer.key, 64);
		EXPECT((p != NULL) == shm);
		if (p)
			for (size_t k = 0; k < 64; k++)
				p[k] = pat(300, 0, k);
		EXPECT_EQ(fi_xpu_put_signal(&n->ep[0], NULL, 0, NULL, &n->raw[0], n->peer.base, n->peer.key,
					    n->peer.base + PTRW, n->peer.key, 0xabc,
					    FI_XPU_SIGNAL_SET, NULL, 0, FI_XPU_WORK_ITEM),
			  0);
		EXPECT_EQ(fi_xpu_quiet(&n->ep[0], 0, FI_XPU_WORK_ITEM), 0);
		{
			struct fi_cq_tagged_entry c;
			EXPECT_EQ(fi_xpu_cq_sread(&n->cq[0], &c, 1, 1, FI_XPU_WORK_ITEM), 1);
			EXPECT_EQ(c.flags, FI_RMA | FI_WRITE);
			EXPECT_EQ(c.len, 0);
		}
	} else {
		EXPECT_EQ(fi_xpu_signal_wait_until(&n->ep[0], (uint64_t *)(void *)(n->heap + PTRW),
						   FI_XPU_CMP_EQ, 0xabc, WAIT_MS, FI_XPU_WORK_ITEM),
			  0);
		if (shm)
			for (size_t k = 0; k < 64; k++)
				EXPECT_EQ(n->heap[PTRD + k], pat(300, 0, k));
	}
	ofi_barrier(n);
}

static int run(int sock, int rank)
{
	struct ofi_opts o = { .nep = 1, .ring = 256, .cq_size = 1024, .heap = HEAP,
			      .local = LOCAL_END };
	static const uint32_t shapes[][3] = { { 2, 6, 4 }, { 1, 1, 1 } };
	const char *prov = getenv("OFI_COMMON_PROV");
	int shm = prov && strcmp(prov, "shm") == 0, bad = 0;
	struct ofi_node n;

	ofi_setup(&n, sock, rank, &o);
	ofi_barrier(&n);
	if (rank == 0) {
		comparisons(&n);
		bad_input(&n, shm);
	}
	ofi_barrier(&n);
	pointer(&n, shm);
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++)
		for (int scope = FI_XPU_WORK_ITEM; scope <= FI_XPU_DEVICE; scope++)
			bad += run_scope(&n, scope, shapes[k][0], shapes[k][1], shapes[k][2]);
	ofi_barrier(&n);
	ofi_teardown(&n);
	return bad;
}

int main(void)
{
	alarm(240);
	return ofi_pair_main("device_signal", NULL, run);
}
