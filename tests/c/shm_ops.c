/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Every device operation of the shm provider between N processes on the
 * host XPU, with one CQ format: RMA write (with and without remote CQ data)
 * and read, counters, protection violations, all atomics over all
 * datatypes (expected values computed here with native C arithmetic),
 * concurrent atomics on neighbouring bytes, send/recv and tagged messages
 * (eager, unexpected, rendezvous, truncated, ignore masks, source
 * addresses), cooperative scopes through the host launcher, and no fd or
 * mapping left behind. Usage: shm_ops NPROCS FORMAT
 */
#include "shm_common.h"

/* The layouts shared with the provider are checked field by field against
 * its Rust definitions (providers/shm/src/layout.rs). */

#define RMA_LEN 5000
#define BIG_LEN (100 * 1024)
#define ATOM_OFF (600 * 1024)
#define CONC_OFF (700 * 1024)
#define MSG_OFF (760 * 1024)
#define RDV_LEN (120 * 1024)
#define SCOPE_OFF (32 * 1024)

static struct world W;
static char marks[64];
#define CTX(i) ((void *)&marks[i])

static unsigned char pat(size_t i, int who)
{
	return (unsigned char)(i * 7 + (size_t)who * 13 + 1);
}

/* Completions may arrive in any order between processes: entries read
 * while waiting for another context are kept here until asked for. */
struct got {
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
	int err;
};
static struct got stash[64];
static int nstash;

/* The completion with context `ctx` (error entries included, with their
 * err), waiting for it up to the CQ's timeout. Returns 0 or the read error. */
static int get(void *ctx, struct got *out)
{
	int i;
	for (;;) {
		struct got g;
		int64_t n;
		for (i = 0; i < nstash; i++)
			if (stash[i].e.op_context == ctx) {
				*out = stash[i];
				stash[i] = stash[--nstash];
				return 0;
			}
		memset(&g, 0, sizeof(g));
		n = next(&W, &g.e, &g.src);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee;
			memset(&ee, 0, sizeof(ee));
			if (fi_xpu_cq_readerr(&W.cq, &ee, 0, FI_XPU_WORK_ITEM) != 1)
				return -FI_EIO;
			g.e.op_context = ee.op_context;
			g.e.flags = ee.flags;
			g.e.len = ee.len;
			g.e.tag = ee.tag;
			g.err = ee.err;
			g.src = ee.olen;
		} else if (n != 1) {
			return (int)n;
		}
		if (nstash == 64)
			return -FI_EOVERFLOW;
		stash[nstash++] = g;
	}
}

/* Waits for `ctx` and checks the entry's fields as far as the format has
 * them; with `err` set an error entry is expected and its err returned. */
static void expect_entry(void *ctx, uint64_t flags, size_t len, uint64_t data, int *err)
{
	struct got g;
	int rc = get(ctx, &g);
	EXPECT(rc, 0);
	if (rc)
		return;
	if (err) {
		*err = g.err;
		EXPECT(g.err != 0, 1);
		return;
	}
	EXPECT(g.err, 0);
	if (W.format >= FI_CQ_FORMAT_MSG) {
		EXPECT(g.e.flags, flags);
		EXPECT(g.e.len, len);
	}
	if (W.format >= FI_CQ_FORMAT_DATA && (flags & FI_REMOTE_CQ_DATA))
		EXPECT(g.e.data, data);
}

static void test_rma(void)
{
	int me = W.rank, to = (me + 1) % W.n, from = (me + W.n - 1) % W.n;
	unsigned char src[RMA_LEN], back[RMA_LEN];
	static unsigned char big[BIG_LEN], bigback[BIG_LEN];
	struct fi_cq_tagged_entry e;
	uint64_t base = W.cards[to].base, key = W.cards[to].key;
	size_t i;
	int64_t n;

	for (i = 0; i < RMA_LEN; i++)
		src[i] = pat(i, me);
	for (i = 0; i < BIG_LEN; i++)
		big[i] = pat(i * 3, me);
	EXPECT(fi_xpu_write(&W.ep, src, RMA_LEN, NULL, 0x1000 + (uint64_t)me, &W.raw[to],
			    base + (uint64_t)me * 8192, key, CTX(1), FI_REMOTE_CQ_DATA,
			    FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(1), FI_WRITE | FI_RMA, RMA_LEN, 0, NULL);
	EXPECT(fi_xpu_write(&W.ep, big, BIG_LEN, NULL, 0, &W.raw[to], base + 300 * 1024 + 0, key,
			    CTX(2), 0, FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(2), FI_WRITE | FI_RMA, BIG_LEN, 0, NULL);
	EXPECT(fi_xpu_cntr_read(&W.wcntr, FI_XPU_WORK_ITEM), 2);
	barrier(&W);
	/* The one remote-CQ-data completion from our left neighbour (len 0, as
	 * on every provider). */
	expect_entry(NULL, FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA, 0,
		     0x1000 + (uint64_t)from, NULL);
	EXPECT(nstash, 0);
	EXPECT(fi_xpu_cq_read(&W.cq, &e, 1, FI_XPU_WORK_ITEM), -FI_EAGAIN);
	(void)n;
	EXPECT(fi_xpu_cntr_read(&W.rwcntr, FI_XPU_WORK_ITEM), 2);
	for (i = 0; i < RMA_LEN; i++)
		if (W.heap[(size_t)from * 8192 + i] != pat(i, from)) {
			EXPECT(W.heap[(size_t)from * 8192 + i], pat(i, from));
			break;
		}
	for (i = 0; i < BIG_LEN; i++)
		if (W.heap[300 * 1024 + i] != pat(i * 3, from)) {
			EXPECT(W.heap[300 * 1024 + i], pat(i * 3, from));
			break;
		}
	barrier(&W);
	/* Read back what we wrote, and the peer's read-only page. */
	EXPECT(fi_xpu_read(&W.ep, back, RMA_LEN, NULL, &W.raw[to], base + (uint64_t)me * 8192, key,
			   CTX(3), 0, FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(3), FI_READ | FI_RMA, RMA_LEN, 0, NULL);
	EXPECT(memcmp(back, src, RMA_LEN), 0);
	EXPECT(fi_xpu_read(&W.ep, bigback, 4096, NULL, &W.raw[to], W.cards[to].ro_base,
			   W.cards[to].ro_key, CTX(4), 0, FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(4), FI_READ | FI_RMA, 4096, 0, NULL);
	for (i = 0; i < 4096; i++)
		if (bigback[i] != 0x5a) {
			EXPECT(bigback[i], 0x5a);
			break;
		}
	EXPECT(fi_xpu_cntr_read(&W.rcntr, FI_XPU_WORK_ITEM), 2);
	barrier(&W);
}

static void test_protection(void)
{
	int me = W.rank, to = (me + 1) % W.n;
	uint64_t base = W.cards[to].base, key = W.cards[to].key;
	unsigned char junk[64];
	int err = 0;
	size_t i;
	uint64_t werr0 = fi_xpu_cntr_readerr(&W.wcntr, FI_XPU_WORK_ITEM);

	memset(junk, 0xee, sizeof(junk));
	/* Wrong key (another generation), a read-only registration, out of
	 * bounds, and a key of a slot never used. */
	EXPECT(fi_xpu_write(&W.ep, junk, 64, NULL, 0, &W.raw[to], base + 200 * 1024, key ^ 1,
			    CTX(10), 0, FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(10), 0, 0, 0, &err);
	EXPECT(err, FI_EACCES);
	EXPECT(fi_xpu_write(&W.ep, junk, 64, NULL, 0, &W.raw[to], W.cards[to].ro_base,
			    W.cards[to].ro_key, CTX(11), 0, FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(11), 0, 0, 0, &err);
	EXPECT(err, FI_EACCES);
	EXPECT(fi_xpu_write(&W.ep, junk, 64, NULL, 0, &W.raw[to], base + HEAP_SIZE - 32, key,
			    CTX(12), 0, FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(12), 0, 0, 0, &err);
	EXPECT(err, FI_EINVAL);
	EXPECT(fi_xpu_write(&W.ep, junk, 64, NULL, 0, &W.raw[to], base - 8, key, CTX(13), 0,
			    FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(13), 0, 0, 0, &err);
	EXPECT(err, FI_EINVAL);
	EXPECT(fi_xpu_write(&W.ep, junk, 64, NULL, 0, &W.raw[to], base, (key & ~0xffffffffULL) | 0x77777,
			    CTX(14), 0, FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(14), 0, 0, 0, &err);
	EXPECT(err, FI_EACCES);
	EXPECT(fi_xpu_cntr_readerr(&W.wcntr, FI_XPU_WORK_ITEM), werr0 + 5);
	EXPECT(fi_xpu_cntr_wait_status(&W.wcntr, 1000, 50, FI_XPU_WORK_ITEM), -FI_ETIMEDOUT);
	barrier(&W);
	/* Nothing was written anywhere. */
	for (i = 0; i < 64; i++) {
		EXPECT(W.heap[200 * 1024 + i], 0);
		EXPECT(W.ro[i], 0x5a);
		EXPECT(W.heap[HEAP_SIZE - 32 + (i % 32)], 0);
	}
	barrier(&W);
}

/* ---- atomics, expected values computed natively ------------------------ */
#define DT_COUNT 10
#define OP_COUNT 19

/* exp_T(op, a, v, c, &out): what `op` leaves in a T that held `a`, given
 * the operand `v` and the compare value `c`; 0 for an operation the type
 * does not have. `cases` are the type's own operations beside the ones
 * every type has (min, max, read, write, the compare-and-swaps). */
#define EXP_FN(T, cases)                                                               \
	static int exp_##T(int op, T a, T v, T c, T *out)                              \
	{                                                                              \
		T r = a;                                                               \
		switch (op) {                                                          \
		case FI_MIN: r = v < a ? v : a; break;                                 \
		case FI_MAX: r = v > a ? v : a; break;                                 \
		cases                                                                  \
		case FI_ATOMIC_READ: r = a; break;                                     \
		case FI_ATOMIC_WRITE: r = v; break;                                    \
		case FI_CSWAP: r = c == a ? v : a; break;                              \
		case FI_CSWAP_NE: r = c != a ? v : a; break;                           \
		case FI_CSWAP_LE: r = c <= a ? v : a; break;                           \
		case FI_CSWAP_LT: r = c < a ? v : a; break;                            \
		case FI_CSWAP_GE: r = c >= a ? v : a; break;                           \
		case FI_CSWAP_GT: r = c > a ? v : a; break;                            \
		default: return 0;                                                     \
		}                                                                      \
		*out = r;                                                              \
		return 1;                                                              \
	}
#define NATIVE_INT(T)                                                                  \
	EXP_FN(T, case FI_SUM: r = (T)(a + v); break;                                  \
		  case FI_PROD: r = (T)(a * v); break;                                 \
		  case FI_LOR: r = (T)(a || v); break;                                 \
		  case FI_LAND: r = (T)(a && v); break;                                \
		  case FI_BOR: r = (T)(a | v); break;                                  \
		  case FI_BAND: r = (T)(a & v); break;                                 \
		  case FI_LXOR: r = (T)((a && !v) || (!a && v)); break;                \
		  case FI_BXOR: r = (T)(a ^ v); break;                                 \
		  case FI_MSWAP: r = (T)((v & c) | (a & ~c)); break;)
#define NATIVE_FP(T)                                                                   \
	EXP_FN(T, case FI_SUM: r = a + v; break; case FI_PROD: r = a * v; break;)
NATIVE_INT(int8_t)
NATIVE_INT(uint8_t)
NATIVE_INT(int16_t)
NATIVE_INT(uint16_t)
NATIVE_INT(int32_t)
NATIVE_INT(uint32_t)
NATIVE_INT(int64_t)
NATIVE_INT(uint64_t)
NATIVE_FP(float)
NATIVE_FP(double)

/* Initial value, operand and compare value of (dt, op), as the C type. */
#define VALUES(T, op, a, v, c)                                                         \
	do {                                                                           \
		a = (T)-5;                                                             \
		v = (T)3;                                                              \
		switch (op) {                                                          \
		case FI_CSWAP_LE: c = (T)(a - 1); break;                               \
		case FI_CSWAP_GE: c = (T)(a + 1); break;                               \
		case FI_MSWAP: c = (T)0x0f; break;                                     \
		default: c = a; break;                                                 \
		}                                                                      \
	} while (0)

static unsigned char *slot(unsigned char *heap, int initiator, int dt, int op)
{
	return heap + ATOM_OFF + ((size_t)initiator * DT_COUNT * OP_COUNT + (size_t)dt * OP_COUNT +
				  (size_t)op) * 16;
}

/* Runs (dt, op) on the peer for type T; checks the fetched old value and
 * returns 1 when the operation is supported. */
#define RUN(T, DT)                                                                     \
	case DT: {                                                                     \
		T a, v, c, res = 0, want;                                              \
		VALUES(T, op, a, v, c);                                                \
		ok = exp_##T(op, a, v, c, &want);                                      \
		if (op >= FI_CSWAP)                                                    \
			rc = fi_xpu_compare_atomic(&W.ep, &v, 1, NULL, &c, NULL, &res, \
						   NULL, &W.raw[to], addr, key, DT,    \
						   (enum fi_op)op, CTX(20), 0,         \
						   FI_XPU_WORK_ITEM);                  \
		else if (op % 2)                                                       \
			rc = fi_xpu_fetch_atomic(&W.ep, &v, 1, NULL, &res, NULL,       \
						 &W.raw[to], addr, key, DT,            \
						 (enum fi_op)op, CTX(20), 0,           \
						 FI_XPU_WORK_ITEM);                    \
		else                                                                   \
			rc = fi_xpu_atomic(&W.ep, &v, 1, NULL, &W.raw[to], addr, key, \
					   DT, (enum fi_op)op, CTX(20), 0,             \
					   FI_XPU_WORK_ITEM);                          \
		if (ok && op == FI_ATOMIC_READ)                                        \
			EXPECT(rc, -FI_EINVAL); /* plain atomic cannot read */         \
		if (ok && op == FI_ATOMIC_READ)                                        \
			rc = fi_xpu_fetch_atomic(&W.ep, NULL, 1, NULL, &res, NULL,     \
						 &W.raw[to], addr, key, DT,            \
						 (enum fi_op)op, CTX(20), 0,           \
						 FI_XPU_WORK_ITEM);                    \
		if (!ok) {                                                             \
			EXPECT(rc, -FI_EOPNOTSUPP);                                    \
			break;                                                         \
		}                                                                      \
		EXPECT(rc, 0);                                                         \
		expect_entry(CTX(20), FI_ATOMIC | ((op >= FI_CSWAP || op % 2 || op == FI_ATOMIC_READ) ? FI_READ : FI_WRITE), \
			     sizeof(T), 0, NULL);                                      \
		if (op >= FI_CSWAP || op % 2)                                          \
			EXPECT(memcmp(&res, &a, sizeof(T)), 0);                        \
		(void)want;                                                            \
		break;                                                                 \
	}

#define CHECK_NEW(T, DT)                                                               \
	case DT: {                                                                     \
		T a, v, c, want, got;                                                  \
		VALUES(T, op, a, v, c);                                                \
		if (!exp_##T(op, a, v, c, &want))                                      \
			break;                                                         \
		memcpy(&got, p, sizeof(T));                                            \
		if (memcmp(&got, &want, sizeof(T)) != 0) {                             \
			fprintf(stderr, "[rank %d] dt %d op %d: wrong result\n",       \
				my_rank, DT, op);                                      \
			failures++;                                                    \
		}                                                                      \
		break;                                                                 \
	}

#define SET_INIT(T, DT)                                                                \
	case DT: {                                                                     \
		T a, v, c;                                                             \
		VALUES(T, op, a, v, c);                                                \
		(void)v;                                                               \
		(void)c;                                                               \
		memcpy(p, &a, sizeof(T));                                              \
		break;                                                                 \
	}

#define ALL_TYPES(M)                                                                   \
	M(int8_t, FI_INT8) M(uint8_t, FI_UINT8) M(int16_t, FI_INT16)                   \
	M(uint16_t, FI_UINT16) M(int32_t, FI_INT32) M(uint32_t, FI_UINT32)             \
	M(int64_t, FI_INT64) M(uint64_t, FI_UINT64) M(float, FI_FLOAT)                 \
	M(double, FI_DOUBLE)

static void test_atomics(void)
{
	int me = W.rank, to = (me + 1) % W.n, from = (me + W.n - 1) % W.n;
	uint64_t key = W.cards[to].key;
	int dt, op, i, rc, ok;
	uint64_t one = 1;
	uint8_t b1 = 1;

	for (dt = 0; dt < DT_COUNT; dt++)
		for (op = 0; op < OP_COUNT; op++) {
			unsigned char *p = slot(W.heap, from, dt, op);
			switch (dt) { ALL_TYPES(SET_INIT) }
		}
	barrier(&W);
	for (dt = 0; dt < DT_COUNT; dt++)
		for (op = 0; op < OP_COUNT; op++) {
			uint64_t addr = W.cards[to].base +
					(uint64_t)(slot(W.heap, me, dt, op) - W.heap);
			rc = 0;
			ok = 0;
			switch (dt) { ALL_TYPES(RUN) }
		}
	/* Bad datatype, misalignment, and a compare op through fi_xpu_atomic. */
	EXPECT(fi_xpu_atomic(&W.ep, &one, 1, NULL, &W.raw[to], W.cards[to].base + ATOM_OFF, key,
			     FI_LONG_DOUBLE, FI_SUM, NULL, 0, FI_XPU_WORK_ITEM), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_atomic(&W.ep, &one, 1, NULL, &W.raw[to], W.cards[to].base + ATOM_OFF + 4,
			     key, FI_UINT64, FI_SUM, NULL, 0, FI_XPU_WORK_ITEM), -FI_EINVAL);
	EXPECT(fi_xpu_atomic(&W.ep, &one, 1, NULL, &W.raw[to], W.cards[to].base + ATOM_OFF, key,
			     FI_UINT64, FI_CSWAP, NULL, 0, FI_XPU_WORK_ITEM), -FI_EINVAL);
	barrier(&W);
	for (dt = 0; dt < DT_COUNT; dt++)
		for (op = 0; op < OP_COUNT; op++) {
			unsigned char *p = slot(W.heap, from, dt, op);
			switch (dt) { ALL_TYPES(CHECK_NEW) }
		}
	barrier(&W);
	/* Everyone hammers rank 0: a 64-bit sum, and one byte each of the same
	 * 32-bit word (atomic against neighbours' updates). */
	for (i = 0; i < 300; i++) {
		EXPECT(fi_xpu_atomic(&W.ep, &one, 1, NULL, &W.raw[0], W.cards[0].base + CONC_OFF,
				     W.cards[0].key, FI_UINT64, FI_SUM, CTX(21), 0,
				     FI_XPU_WORK_ITEM), 0);
		expect_entry(CTX(21), FI_ATOMIC | FI_WRITE, 8, 0, NULL);
		EXPECT(fi_xpu_atomic(&W.ep, &b1, 1, NULL, &W.raw[0],
				     W.cards[0].base + CONC_OFF + 8 + (uint64_t)me, W.cards[0].key,
				     FI_UINT8, FI_SUM, CTX(22), 0, FI_XPU_WORK_ITEM), 0);
		expect_entry(CTX(22), FI_ATOMIC | FI_WRITE, 1, 0, NULL);
	}
	barrier(&W);
	if (me == 0) {
		uint64_t total;
		memcpy(&total, W.heap + CONC_OFF, 8);
		EXPECT(total, 300 * (uint64_t)W.n);
		for (i = 0; i < W.n; i++)
			EXPECT(W.heap[CONC_OFF + 8 + (size_t)i], 300 % 256);
		for (i = W.n; i < 8; i++)
			EXPECT(W.heap[CONC_OFF + 8 + (size_t)i], 0);
	}
	barrier(&W);
}

static void test_msg(void)
{
	int me = W.rank, to = (me + 1) % W.n, from = (me + W.n - 1) % W.n;
	unsigned char small[200], got[200], t1[64], t2[64];
	unsigned char *rdv_src = W.heap + MSG_OFF, *rdv_dst = W.heap + MSG_OFF + RDV_LEN;
	unsigned char desc[32];
	size_t dlen = sizeof(desc), i;
	uint64_t u1 = 0x1234, u2 = 0x5678;
	int err = 0;
	struct got g;

	for (i = 0; i < sizeof(small); i++)
		small[i] = pat(i, me);
	for (i = 0; i < RDV_LEN; i++)
		rdv_src[i] = pat(i * 5, me);
	EXPECT(fi_xpu_mr_desc(W.mr, desc, &dlen, 0, W.ctx), 0);
	EXPECT(dlen, 32);
	/* All sends first: every one arrives unexpected. */
	EXPECT(fi_xpu_send(&W.ep, small, 100, NULL, 0x77, &W.raw[to], CTX(30), FI_REMOTE_CQ_DATA,
			   FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(30), FI_SEND | FI_MSG, 100, 0, NULL);
	EXPECT(fi_xpu_tsend(&W.ep, &u1, 8, NULL, 0, &W.raw[to], 0x1234, CTX(31), 0,
			    FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(31), FI_SEND | FI_TAGGED, 8, 0, NULL);
	EXPECT(fi_xpu_tsend(&W.ep, &u2, 8, NULL, 0, &W.raw[to], 0x5678, CTX(32), 0,
			    FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(32), FI_SEND | FI_TAGGED, 8, 0, NULL);
	EXPECT(fi_xpu_send(&W.ep, small, 200, NULL, 0, &W.raw[to], CTX(33), 0, FI_XPU_WORK_ITEM),
	       0);
	expect_entry(CTX(33), FI_SEND | FI_MSG, 200, 0, NULL);
	/* Larger than an inbox slot, from registered memory: pulled by the
	 * receiver (unregistered buffers stream instead, see shm_msg.c). */
	EXPECT(fi_xpu_send(&W.ep, rdv_src, RDV_LEN, desc, 0, &W.raw[to], CTX(34), 0,
			   FI_XPU_WORK_ITEM), 0);
	barrier(&W);

	memset(got, 0, sizeof(got));
	EXPECT(fi_xpu_recv(&W.ep, got, sizeof(got), NULL, NULL, CTX(40), 0, FI_XPU_WORK_ITEM), 0);
	REQUIRE(get(CTX(40), &g), 0);
	EXPECT(g.err, 0);
	if (W.format >= FI_CQ_FORMAT_MSG) {
		EXPECT(g.e.flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
		EXPECT(g.e.len, 100);
	}
	if (W.format >= FI_CQ_FORMAT_DATA) {
		EXPECT(g.e.buf == got, 1);
		EXPECT(g.e.data, 0x77);
	}
	EXPECT(g.src, W.fa[from]);
	for (i = 0; i < 100; i++)
		EXPECT(got[i], pat(i, from));
	/* Tag 0x56xx with the low byte ignored: only the second tagged send. */
	memset(t1, 0, sizeof(t1));
	memset(t2, 0, sizeof(t2));
	EXPECT(fi_xpu_trecv(&W.ep, t2, sizeof(t2), NULL, NULL, 0x5600, 0xff, CTX(41), 0,
			    FI_XPU_WORK_ITEM), 0);
	REQUIRE(get(CTX(41), &g), 0);
	if (W.format >= FI_CQ_FORMAT_TAGGED)
		EXPECT(g.e.tag, 0x5678);
	if (W.format >= FI_CQ_FORMAT_MSG)
		EXPECT(g.e.flags, FI_RECV | FI_TAGGED);
	EXPECT(memcmp(t2, &u2, 8), 0);
	EXPECT(fi_xpu_trecv(&W.ep, t1, sizeof(t1), NULL, NULL, 0x1234, 0, CTX(42), 0,
			    FI_XPU_WORK_ITEM), 0);
	REQUIRE(get(CTX(42), &g), 0);
	EXPECT(memcmp(t1, &u1, 8), 0);
	/* 200 bytes into 100: truncated, reported as an error entry. */
	EXPECT(fi_xpu_recv(&W.ep, got, 100, NULL, NULL, CTX(43), 0, FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(43), 0, 0, 0, &err);
	EXPECT(err, FI_ETRUNC);
	/* The rendezvous message, pulled straight from the sender's memory. */
	EXPECT(fi_xpu_recv(&W.ep, rdv_dst, RDV_LEN, NULL, NULL, CTX(44), 0, FI_XPU_WORK_ITEM), 0);
	expect_entry(CTX(44), FI_RECV | FI_MSG, RDV_LEN, 0, NULL);
	/* Our own rendezvous send completes once the peer has pulled it. */
	expect_entry(CTX(34), FI_SEND | FI_MSG, RDV_LEN, 0, NULL);
	for (i = 0; i < RDV_LEN; i++)
		if (rdv_dst[i] != pat(i * 5, from)) {
			EXPECT(rdv_dst[i], pat(i * 5, from));
			break;
		}
	EXPECT(nstash, 0);
	EXPECT(fi_xpu_cq_read(&W.cq, &g.e, 1, FI_XPU_WORK_ITEM), -FI_EAGAIN);
	barrier(&W);
}

/* ---- cooperative scopes on the host launcher --------------------------- */
#define SC_ITEMS 8
struct kargs {
	int to;
	unsigned char *src;
	int64_t rc[3];
	uint64_t old[SC_ITEMS];
};

static void kernel(void *arg)
{
	struct kargs *k = (struct kargs *)arg;
	uint32_t item = fi_xpu_arch_local_id(), sg = fi_xpu_arch_subgroup_id();
	uint64_t base = W.cards[k->to].base, key = W.cards[k->to].key, one = 1, old = 77;
	struct fi_cq_tagged_entry e[16]; /* room for any format */
	int rc, n = 0;

	/* Cooperative writes: one per group, its copy shared by the group. */
	rc = fi_xpu_coop_write(&W.ep, k->src, 64 * 1024, NULL, 0, &W.raw[k->to], base + SCOPE_OFF, key,
			  CTX(50), 0, FI_XPU_WORK_GROUP);
	if (item == 0)
		k->rc[0] = rc;
	rc = fi_xpu_coop_write(&W.ep, k->src + sg * 4096, 4096, NULL, 0, &W.raw[k->to],
			  base + SCOPE_OFF + 64 * 1024 + sg * 4096, key, CTX(51), 0,
			  FI_XPU_SUBGROUP);
	if (fi_xpu_arch_lane_id() == 0 && rc != 0)
		k->rc[1] = rc;
	rc = fi_xpu_fetch_atomic(&W.ep, &one, 1, NULL, &old, NULL, &W.raw[k->to],
				 base + SCOPE_OFF + 80 * 1024, key, FI_UINT64, FI_SUM, CTX(52), 0,
				 FI_XPU_DEVICE);
	/* One atomic per work item, each with its own fetched value. */
	if (rc != 0)
		k->rc[2] = rc;
	k->old[item] = old;
	/* 1 + 2 + 8 completions, read by the whole group at once: the leader
	 * reads, every member gets the count. */
	while (n < 11) {
		int64_t got = fi_xpu_cq_read(&W.cq, e, 11 - (size_t)n, FI_XPU_WORK_GROUP);
		if (got > 0)
			n += (int)got;
		else if (got != -FI_EAGAIN)
			break;
	}
	if (n != 11)
		k->rc[0] = -FI_EIO;
}

static void test_scopes(void)
{
	int me = W.rank, to = (me + 1) % W.n, from = (me + W.n - 1) % W.n;
	struct fi_xpu_host_launch_attr la = { .num_groups = 1, .group_size = 8, .subgroup_size = 4,
					      .flags = 0 };
	struct kargs k;
	static unsigned char src[64 * 1024];
	uint64_t rw0 = fi_xpu_cntr_read(&W.rwcntr, FI_XPU_WORK_ITEM), v;
	size_t i;

	/* Nobody writes to us until everyone has read its starting count. */
	barrier(&W);
	memset(&k, 0, sizeof(k));
	k.to = to;
	k.src = src;
	for (i = 0; i < sizeof(src); i++)
		src[i] = pat(i * 11, me);
	EXPECT(fi_xpu_host_launch(&la, kernel, &k), 0);
	EXPECT(k.rc[0], 0);
	EXPECT(k.rc[1], 0);
	EXPECT(k.rc[2], 0);
	{
		int seen[SC_ITEMS] = { 0 };
		for (i = 0; i < SC_ITEMS; i++)
			if (k.old[i] < SC_ITEMS)
				seen[k.old[i]]++;
		for (i = 0; i < SC_ITEMS; i++)
			EXPECT(seen[i], 1); /* fetched values 0..7, each once */
	}
	barrier(&W);
	for (i = 0; i < sizeof(src); i++)
		if (W.heap[SCOPE_OFF + i] != pat(i * 11, from)) {
			EXPECT(W.heap[SCOPE_OFF + i], pat(i * 11, from));
			break;
		}
	for (i = 0; i < 2 * 4096; i++)
		if (W.heap[SCOPE_OFF + 64 * 1024 + i] != pat(i * 11, from)) {
			EXPECT(W.heap[SCOPE_OFF + 64 * 1024 + i], pat(i * 11, from));
			break;
		}
	memcpy(&v, W.heap + SCOPE_OFF + 80 * 1024, 8);
	EXPECT(v, SC_ITEMS); /* once per work item */
	/* One group write, two subgroup writes, eight atomics from our
	 * neighbour. */
	EXPECT(fi_xpu_cntr_read(&W.rwcntr, FI_XPU_WORK_ITEM), rw0 + 3 + SC_ITEMS);
	barrier(&W);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2;
	int format = argc > 2 ? atoi(argv[2]) : FI_CQ_FORMAT_TAGGED;
	int fds0, maps0;
	struct fi_xpu_info *info;
	char name[64];

	if (n < 2 || n > MAXP)
		return 2;
	/* Load the plugins before counting what is open. */
	if (fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info) == 0)
		fi_xpu_freeinfo(info);
	spawn(&W, n);
	fds0 = count_fds();
	maps0 = count_memfd_maps();
	open_world(&W, format);
	test_rma();
	test_protection();
	test_atomics();
	test_msg();
	test_scopes();
	close_world(&W);
	EXPECT(count_fds(), fds0);
	EXPECT(count_memfd_maps(), maps0);
	snprintf(name, sizeof(name), "shm_ops n=%d format=%d", n, format);
	return finish(&W, name);
}
