/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * "testprov": a test-only device provider with a loopback data path, used to
 * exercise the dispatch of fi_xpu/device.h and the cooperative helpers
 * the way a real provider does. It is an out-of-tree provider as far as the
 * dispatch knows: prov_id FI_XPU_PROV_USER_BASE + 7, included through
 * FI_XPU_DEVICE_EXTRA_HEADER or before fi_xpu_device.h, and named in
 * FI_XPU_DEVICE_PROVIDERS.
 *
 * Handles carry a pointer to host/device-visible state in fid.prov_ctx.
 * Every state begins with a call count per operation (bumped once per scope
 * instance), so a test can see which provider function the dispatch reached.
 * write/read copy between `buf` and the address `addr` (loopback: the
 * "remote" is this process), check `key`, bump the endpoint's counter and
 * queue a completion; counters and the CQ are real. The other operations
 * record the call and return -FI_EOPNOTSUPP.
 *
 * Define TESTPROV_NOINLINE to keep the provider functions out of line, so
 * the generated code shows whether the dispatch calls them directly.
 */
#ifndef FI_XPU_DEVICE_TESTPROV_H
#define FI_XPU_DEVICE_TESTPROV_H

#include <fi_xpu/device_arch.h>
#include <fi_xpu/device_coop.h>

#define FI_XPU_PROV_TESTPROV (FI_XPU_PROV_USER_BASE + 7)
#define FI_XPU_DEVICE_ID_testprov FI_XPU_PROV_TESTPROV

#ifdef TESTPROV_NOINLINE
#define TESTPROV_FUNC static __attribute__((noinline)) FI_XPU_ARCH_QUALIFIER
#else
#define TESTPROV_FUNC FI_XPU_FUNC
#endif

#define TESTPROV_KEY 0x7e57u
#define TESTPROV_CQ_SIZE 64u
#define TESTPROV_MS FI_XPU_ARCH_MS_SYSTEM

enum {
	TESTPROV_OP_WRITE = 0,
	TESTPROV_OP_READ = 1,
	TESTPROV_OP_SEND = 2,
	TESTPROV_OP_RECV = 3,
	TESTPROV_OP_TSEND = 4,
	TESTPROV_OP_TRECV = 5,
	TESTPROV_OP_ATOMIC = 6,
	TESTPROV_OP_FETCH_ATOMIC = 7,
	TESTPROV_OP_COMPARE_ATOMIC = 8,
	TESTPROV_OP_FLUSH = 9,
	TESTPROV_OP_CNTR_READ = 10,
	TESTPROV_OP_CNTR_READERR = 11,
	TESTPROV_OP_CNTR_WAIT = 12,
	TESTPROV_OP_CNTR_ADD = 13,
	TESTPROV_OP_CNTR_SET = 14,
	TESTPROV_OP_CNTR_ADDERR = 15,
	TESTPROV_OP_CNTR_SETERR = 16,
	TESTPROV_OP_CQ_READ = 17,
	TESTPROV_OP_CQ_READFROM = 18,
	TESTPROV_OP_CQ_READERR = 19,
	TESTPROV_OP_CQ_SREAD = 20,
	TESTPROV_OP_CQ_SREADFROM = 21,
	TESTPROV_NUM_OPS = 22,
};

struct testprov_cntr {
	uint64_t calls[TESTPROV_NUM_OPS];
	uint64_t value;
	uint64_t err;
};

/* Multi-producer multi-consumer ring: a slot is full when its sequence
 * number is its position + 1. */
struct testprov_cq {
	uint64_t calls[TESTPROV_NUM_OPS];
	uint64_t head;
	uint64_t tail;
	uint64_t seq[TESTPROV_CQ_SIZE];
	void *ctx[TESTPROV_CQ_SIZE];
};

struct testprov_ep {
	uint64_t calls[TESTPROV_NUM_OPS];
	struct testprov_cntr *cntr;
	struct testprov_cq *cq;
};

FI_XPU_FUNC void testprov_called(uint64_t prov_ctx, int op, int scope)
{
	uint64_t *calls = (uint64_t *)(uintptr_t)prov_ctx;
	if (fi_xpu_arch_scope_rank(scope) == 0)
		fi_xpu_arch_fetch_add_u64(&calls[op], 1, FI_XPU_ARCH_RELAXED, TESTPROV_MS);
}

/* Queues one completion; -FI_EAGAIN when the ring is full. */
FI_XPU_FUNC int testprov_cq_push(struct testprov_cq *q, void *context)
{
	uint64_t head = fi_xpu_arch_load_u64(&q->head, FI_XPU_ARCH_ACQUIRE, TESTPROV_MS);
	uint64_t slot;
	int ret = fi_xpu_coop_reserve_below(&q->tail, 1, head + TESTPROV_CQ_SIZE,
					    FI_XPU_WORK_ITEM, TESTPROV_MS, &slot);
	if (ret)
		return ret;
	q->ctx[slot % TESTPROV_CQ_SIZE] = context;
	fi_xpu_arch_store_u64(&q->seq[slot % TESTPROV_CQ_SIZE], slot + 1, FI_XPU_ARCH_RELEASE,
			      TESTPROV_MS);
	return 0;
}

FI_XPU_FUNC int testprov_complete(struct testprov_ep *ep, void *context, int scope)
{
	int ret = 0;
	if (fi_xpu_arch_scope_rank(scope) == 0) {
		if (ep->cntr)
			fi_xpu_arch_fetch_add_u64(&ep->cntr->value, 1, FI_XPU_ARCH_RELEASE,
						  TESTPROV_MS);
		if (ep->cq)
			ret = testprov_cq_push(ep->cq, context);
	}
	return fi_xpu_coop_broadcast_int(scope, ret);
}

TESTPROV_FUNC int fi_xpu_write_testprov(struct fid_xpu_ep *ep, const void *buf, size_t len,
					void *desc, uint64_t data, void *dest_addr,
					uint64_t addr, uint64_t key, void *context,
					uint64_t flags, int scope)
{
	struct testprov_ep *e = (struct testprov_ep *)(uintptr_t)ep->fid.prov_ctx;
	int ret = fi_xpu_arch_scope_check(scope);

	(void)desc, (void)data, (void)dest_addr, (void)flags;
	if (ret)
		return ret;
	testprov_called(ep->fid.prov_ctx, TESTPROV_OP_WRITE, scope);
	if (key != TESTPROV_KEY)
		return -FI_EACCES;
	ret = fi_xpu_coop_copy((void *)(uintptr_t)addr, buf, len, scope, TESTPROV_MS);
	return ret ? ret : testprov_complete(e, context, scope);
}

TESTPROV_FUNC int fi_xpu_read_testprov(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				       void *src_addr, uint64_t addr, uint64_t key,
				       void *context, uint64_t flags, int scope)
{
	struct testprov_ep *e = (struct testprov_ep *)(uintptr_t)ep->fid.prov_ctx;
	int ret = fi_xpu_arch_scope_check(scope);

	(void)desc, (void)src_addr, (void)flags;
	if (ret)
		return ret;
	testprov_called(ep->fid.prov_ctx, TESTPROV_OP_READ, scope);
	if (key != TESTPROV_KEY)
		return -FI_EACCES;
	ret = fi_xpu_coop_copy(buf, (const void *)(uintptr_t)addr, len, scope, TESTPROV_MS);
	return ret ? ret : testprov_complete(e, context, scope);
}

#define TESTPROV_CNTR(c) ((struct testprov_cntr *)(uintptr_t)(c)->fid.prov_ctx)

TESTPROV_FUNC uint64_t fi_xpu_cntr_read_testprov(struct fid_xpu_cntr *cntr, int scope)
{
	testprov_called(cntr->fid.prov_ctx, TESTPROV_OP_CNTR_READ, scope);
	return fi_xpu_arch_load_u64(&TESTPROV_CNTR(cntr)->value, FI_XPU_ARCH_ACQUIRE, TESTPROV_MS);
}

TESTPROV_FUNC uint64_t fi_xpu_cntr_readerr_testprov(struct fid_xpu_cntr *cntr, int scope)
{
	testprov_called(cntr->fid.prov_ctx, TESTPROV_OP_CNTR_READERR, scope);
	return fi_xpu_arch_load_u64(&TESTPROV_CNTR(cntr)->err, FI_XPU_ARCH_ACQUIRE, TESTPROV_MS);
}

/* The leader waits and tells the others how it ended. */
TESTPROV_FUNC int fi_xpu_cntr_wait_testprov(struct fid_xpu_cntr *cntr, uint64_t threshold,
					    int timeout_ms, int scope)
{
	struct testprov_cntr *c = TESTPROV_CNTR(cntr);
	int ret = fi_xpu_arch_scope_check(scope);

	if (ret)
		return ret;
	testprov_called(cntr->fid.prov_ctx, TESTPROV_OP_CNTR_WAIT, scope);
	if (fi_xpu_arch_scope_rank(scope) == 0) {
		uint64_t err0 = fi_xpu_arch_load_u64(&c->err, FI_XPU_ARCH_ACQUIRE, TESTPROV_MS);
		uint64_t start = fi_xpu_arch_clock_ns();
		for (;;) {
			if (fi_xpu_arch_load_u64(&c->value, FI_XPU_ARCH_ACQUIRE, TESTPROV_MS) >= threshold)
				break;
			if (fi_xpu_arch_load_u64(&c->err, FI_XPU_ARCH_ACQUIRE, TESTPROV_MS) != err0) {
				ret = -FI_EAVAIL;
				break;
			}
			if (timeout_ms >= 0 &&
			    fi_xpu_arch_clock_ns() - start >= (uint64_t)timeout_ms * 1000000u) {
				ret = -FI_ETIMEDOUT;
				break;
			}
			fi_xpu_arch_pause();
		}
	}
	return fi_xpu_coop_broadcast_int(scope, ret);
}

#define TESTPROV_CNTR_UPDATE(NAME, OP, FIELD, ADD)                                      \
	TESTPROV_FUNC int fi_xpu_##NAME##_testprov(struct fid_xpu_cntr *cntr, uint64_t value, \
						   int scope)                             \
	{                                                                               \
		struct testprov_cntr *c = TESTPROV_CNTR(cntr);                          \
		testprov_called(cntr->fid.prov_ctx, OP, scope);                         \
		if (fi_xpu_arch_scope_rank(scope) == 0) {                               \
			if (ADD)                                                        \
				fi_xpu_arch_fetch_add_u64(&c->FIELD, value,             \
							  FI_XPU_ARCH_RELEASE, TESTPROV_MS); \
			else                                                            \
				fi_xpu_arch_store_u64(&c->FIELD, value,                 \
						      FI_XPU_ARCH_RELEASE, TESTPROV_MS); \
		}                                                                       \
		return fi_xpu_arch_barrier(scope);                                      \
	}
TESTPROV_CNTR_UPDATE(cntr_add, TESTPROV_OP_CNTR_ADD, value, 1)
TESTPROV_CNTR_UPDATE(cntr_set, TESTPROV_OP_CNTR_SET, value, 0)
TESTPROV_CNTR_UPDATE(cntr_adderr, TESTPROV_OP_CNTR_ADDERR, err, 1)
TESTPROV_CNTR_UPDATE(cntr_seterr, TESTPROV_OP_CNTR_SETERR, err, 0)

/* The leader takes up to `count` completions; everyone gets the number. */
TESTPROV_FUNC int64_t fi_xpu_cq_read_testprov(struct fid_xpu_cq *cq, void *buf, size_t count,
					      int scope)
{
	struct testprov_cq *q = (struct testprov_cq *)(uintptr_t)cq->fid.prov_ctx;
	struct fi_cq_entry *out = (struct fi_cq_entry *)buf;
	int ret = fi_xpu_arch_scope_check(scope);
	int n = 0;

	if (ret)
		return ret;
	testprov_called(cq->fid.prov_ctx, TESTPROV_OP_CQ_READ, scope);
	if (fi_xpu_arch_scope_rank(scope) == 0) {
		while ((size_t)n < count) {
			uint64_t h = fi_xpu_arch_load_u64(&q->head, FI_XPU_ARCH_RELAXED, TESTPROV_MS);
			uint64_t s = fi_xpu_arch_load_u64(&q->seq[h % TESTPROV_CQ_SIZE],
							  FI_XPU_ARCH_ACQUIRE, TESTPROV_MS);
			void *ctx;
			if (s != h + 1)
				break;
			ctx = q->ctx[h % TESTPROV_CQ_SIZE];
			if (fi_xpu_arch_cas_u64(&q->head, h, h + 1, FI_XPU_ARCH_ACQ_REL, TESTPROV_MS) == h)
				out[n++].op_context = ctx;
		}
	}
	n = fi_xpu_coop_broadcast_int(scope, n);
	return n ? n : -FI_EAGAIN;
}

/* The stubs below take every argument and look at none but the handle. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
TESTPROV_FUNC int fi_xpu_send_testprov(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, void *context, uint64_t flags, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(ep->fid.prov_ctx, TESTPROV_OP_SEND, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int fi_xpu_recv_testprov(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, void *context, uint64_t flags, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(ep->fid.prov_ctx, TESTPROV_OP_RECV, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int fi_xpu_tsend_testprov(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t tag, void *context, uint64_t flags, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(ep->fid.prov_ctx, TESTPROV_OP_TSEND, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int fi_xpu_trecv_testprov(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, uint64_t tag, uint64_t ignore, void *context, uint64_t flags, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(ep->fid.prov_ctx, TESTPROV_OP_TRECV, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int fi_xpu_atomic_testprov(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(ep->fid.prov_ctx, TESTPROV_OP_ATOMIC, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int fi_xpu_fetch_atomic_testprov(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(ep->fid.prov_ctx, TESTPROV_OP_FETCH_ATOMIC, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int fi_xpu_compare_atomic_testprov(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, const void *compare, void *compare_desc, void *result, void *result_desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(ep->fid.prov_ctx, TESTPROV_OP_COMPARE_ATOMIC, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int fi_xpu_flush_testprov(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(ep->fid.prov_ctx, TESTPROV_OP_FLUSH, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int64_t fi_xpu_cq_readfrom_testprov(struct fid_xpu_cq *cq, void *buf, size_t count, void *src_addr, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(cq->fid.prov_ctx, TESTPROV_OP_CQ_READFROM, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int64_t fi_xpu_cq_readerr_testprov(struct fid_xpu_cq *cq, void *buf, uint64_t flags, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(cq->fid.prov_ctx, TESTPROV_OP_CQ_READERR, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int64_t fi_xpu_cq_sread_testprov(struct fid_xpu_cq *cq, void *buf, size_t count, uint64_t threshold, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(cq->fid.prov_ctx, TESTPROV_OP_CQ_SREAD, scope);
	return -FI_EOPNOTSUPP;
}

TESTPROV_FUNC int64_t fi_xpu_cq_sreadfrom_testprov(struct fid_xpu_cq *cq, void *buf, size_t count, void *src_addr, uint64_t threshold, int scope)
{
	/* Not a loopback operation: it only proves the dispatch got here. */
	testprov_called(cq->fid.prov_ctx, TESTPROV_OP_CQ_SREADFROM, scope);
	return -FI_EOPNOTSUPP;
}
#pragma GCC diagnostic pop

#endif /* FI_XPU_DEVICE_TESTPROV_H */
