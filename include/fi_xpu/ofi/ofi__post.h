/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu ofi provider, device side: the ring. Pointers to the device
 * blocks behind handles, the loads and stores of the words shared with
 * the proxy, and a group's post: slots claimed with one atomic, entries
 * filled and published, one doorbell.
 * Part of <fi_xpu/device_ofi.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_OFI_OFI_POST_H
#define FI_XPU_INCLUDED_OFI_OFI_POST_H

#include <fi_xpu/device_arch.h>
#include <fi_xpu/device_coop.h>
#include <fi_xpu/device_check.h>
#include <fi_xpu/device_handle.h>
#include <fi_xpu/device_group.h>
#include <fi_xpu/ofi/ofi__types.h>

#if defined(FI_XPU_ARCH_HOST) && defined(__linux__) && !defined(FI_XPU_OFI_NO_WAKE) &&       \
	!defined(FI_XPU_OFI_NO_FUTEX)
#define FI_XPU_I_OFI_WAKE 1
#include <sys/syscall.h>
#ifdef __cplusplus
#include <unistd.h>
#else
extern long syscall(long number, ...);
#endif
#endif

#ifndef FI_ADDR_UNSPEC
#define FI_ADDR_UNSPEC ((uint64_t)-1)
#endif
#ifndef FI_ADDR_NOTAVAIL
#define FI_ADDR_NOTAVAIL ((uint64_t)-1)
#endif

/* ---- helpers ------------------------------------------------------------- */
#define FI_XPU_OFI_P(T, v) ((T *)(uintptr_t)(v))
#define FI_XPU_OFI_SYS FI_XPU_ARCH_MS_SYSTEM

FI_XPU_FUNC uint64_t fi_xpu_ofi_ld(const uint64_t *p)
{
	return fi_xpu_arch_load_u64(p, FI_XPU_ARCH_ACQUIRE, FI_XPU_OFI_SYS);
}

/* Polls of the words the proxy writes in pinned host memory (CQ entries,
 * the flushed count): relaxed on GPUs (FI_XPU_ARCH_POLL), so a look that finds nothing invalidates no
 * cache; one acquire fence (fi_xpu_ofi_acq) once something is there. */
FI_XPU_FUNC uint64_t fi_xpu_ofi_poll(const uint64_t *p)
{
	return fi_xpu_arch_load_u64(p, FI_XPU_ARCH_POLL, FI_XPU_OFI_SYS);
}

FI_XPU_FUNC void fi_xpu_ofi_acq(void)
{
	fi_xpu_arch_fence(FI_XPU_ARCH_ACQUIRE, FI_XPU_OFI_SYS);
}

FI_XPU_FUNC void fi_xpu_ofi_st(uint64_t *p, uint64_t v)
{
	fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELEASE, FI_XPU_OFI_SYS);
}

/* The device blocks behind handles, or NULL unless the block's validity
 * word (`magic`) says live, of that class, of this version
 * (fi_xpu/device_handle.h). */
FI_XPU_FUNC struct fi_xpu_ofi_ep_dev *fi_xpu_ofi_ep(const struct fid_xpu_ep *ep)
{
	struct fi_xpu_ofi_ep_dev *d =
		ep ? FI_XPU_OFI_P(struct fi_xpu_ofi_ep_dev, ep->fid.prov_ctx)
		   : FI_XPU_I_NULL;
	return d && fi_xpu_handle_live(&d->magic, FI_XPU_HANDLE_EP) ? d
								     : FI_XPU_I_NULL;
}

/* The abort word of an endpoint's context (0: none), for the waits that
 * are given an endpoint (fi_xpu_signal_wait_until). */
FI_XPU_FUNC uint64_t fi_xpu_ofi_abort_word(const struct fid_xpu_ep *hep)
{
	const struct fi_xpu_ofi_ep_dev *ep = fi_xpu_ofi_ep(hep);
	return ep ? ep->abort : 0;
}

FI_XPU_FUNC struct fi_xpu_ofi_cq_dev *fi_xpu_ofi_cq(const struct fid_xpu_cq *cq)
{
	struct fi_xpu_ofi_cq_dev *d =
		cq ? FI_XPU_OFI_P(struct fi_xpu_ofi_cq_dev, cq->fid.prov_ctx)
		   : FI_XPU_I_NULL;
	return d && fi_xpu_handle_live(&d->magic, FI_XPU_HANDLE_CQ) ? d
								     : FI_XPU_I_NULL;
}

FI_XPU_FUNC uint64_t fi_xpu_ofi_desc_id(const void *desc)
{
	return desc ? ((const struct fi_xpu_ofi_mr_desc *)desc)->id : 0;
}

FI_XPU_FUNC uint64_t fi_xpu_ofi_addr(const void *raw)
{
	return raw ? *(const uint64_t *)raw : FI_ADDR_UNSPEC;
}

FI_XPU_FUNC struct fi_xpu_ofi_wqe fi_xpu_ofi_wqe_zero(void)
{
	struct fi_xpu_ofi_wqe w;
	w.seq = 0;
	w.op = 0;
	w.atomic = 0;
	w.flags = w.addr = w.buf = w.len = w.desc = w.raddr = w.rkey = 0;
	w.context = w.data = w.tag = w.ignore = 0;
	w.compare = w.result = w.result_desc = 0;
	return w;
}

/* An entry between `len` bytes (elements, for atomics) at the local `buf`
 * and the peer's (raddr, rkey): the fields that writes, reads, atomics and
 * puts with signal share; the caller adds the rest. */
FI_XPU_FUNC struct fi_xpu_ofi_wqe fi_xpu_ofi_wqe_rma(uint32_t op, uint64_t flags, const void *peer,
						     const void *buf, size_t len, void *desc,
						     uint64_t raddr, uint64_t rkey, void *context)
{
	struct fi_xpu_ofi_wqe w = fi_xpu_ofi_wqe_zero();
	w.op = op;
	w.flags = flags;
	w.addr = fi_xpu_ofi_addr(peer);
	w.buf = (uint64_t)(uintptr_t)buf;
	w.len = len;
	w.desc = fi_xpu_ofi_desc_id(desc);
	w.raddr = raddr;
	w.rkey = rkey;
	w.context = (uint64_t)(uintptr_t)context;
	return w;
}

FI_XPU_FUNC void fi_xpu_ofi_copy_bytes(void *dst, const void *src, size_t n)
{
	unsigned char *d = (unsigned char *)dst;
	const unsigned char *s = (const unsigned char *)src;
	size_t i;
	for (i = 0; i < n; i++)
		d[i] = s[i];
}

/* Bytes of one element of an atomic datatype, 0 for one the proxy does
 * not take. */
FI_XPU_FUNC uint64_t fi_xpu_ofi_dt_size(uint32_t dt)
{
	switch (dt) {
	case FI_INT8:
	case FI_UINT8:
		return 1;
	case FI_INT16:
	case FI_UINT16:
		return 2;
	case FI_INT32:
	case FI_UINT32:
	case FI_FLOAT:
		return 4;
	case FI_INT64:
	case FI_UINT64:
	case FI_DOUBLE:
		return 8;
	default:
		return 0;
	}
}

/* Source bytes an FI_INJECT entry copies into its staging slot (the
 * operand; compare atomics copy as many compare bytes beside it), or a
 * negative error: an operation with no source, or an atomic whose size
 * is unknown, takes no FI_INJECT. */
FI_XPU_FUNC int64_t fi_xpu_ofi_inject_bytes(const struct fi_xpu_ofi_wqe *w)
{
	uint64_t dt;
	switch (w->op) {
	case FI_XPU_OFI_OP_WRITE:
	case FI_XPU_OFI_OP_SEND:
	case FI_XPU_OFI_OP_TSEND:
		return (int64_t)(w->len > 0x7fffffffULL ? 0x7fffffffULL : w->len);
	case FI_XPU_OFI_OP_ATOMIC:
	case FI_XPU_OFI_OP_FETCH_ATOMIC:
	case FI_XPU_OFI_OP_COMPARE_ATOMIC:
		if ((w->atomic >> 16) == FI_ATOMIC_READ)
			return 0;
		dt = fi_xpu_ofi_dt_size(w->atomic & 0xffff);
		if (!dt || w->len > 0x7fffffffULL)
			return -FI_EINVAL;
		return (int64_t)(dt * w->len);
	default:
		return -FI_EINVAL;
	}
}

/* Claims `n` consecutive ring slots with one CAS on `prod` (retried only
 * when another poster moved it), against the cached consumer index first
 * and the proxy's own only when the ring looks full. -FI_EAGAIN when the
 * slots are not free (nothing claimed), -FI_EOPNOTSUPP when `n` exceeds the
 * ring (a group larger than the ring can never post at once). */
FI_XPU_FUNC int fi_xpu_ofi_claim(struct fi_xpu_ofi_ep_dev *ep, uint64_t n, uint64_t *pos)
{
	uint64_t size = ep->size;
	uint64_t p = fi_xpu_arch_load_u64(&ep->prod, FI_XPU_ARCH_RELAXED, FI_XPU_OFI_SYS);
	uint64_t c = fi_xpu_arch_load_u64(&ep->cons_cache, FI_XPU_ARCH_RELAXED, FI_XPU_OFI_SYS);
	if (n > size)
		return -FI_EOPNOTSUPP;
	for (;;) {
		uint64_t old;
		/* A consumer index ahead of a stale `p` means `p` moved: the
		 * CAS below fails and reloads it. */
		if ((int64_t)(p - c) > (int64_t)(size - n)) {
			c = fi_xpu_ofi_ld(&ep->cons);
			fi_xpu_arch_store_u64(&ep->cons_cache, c, FI_XPU_ARCH_RELAXED,
					      FI_XPU_OFI_SYS);
			if ((int64_t)(p - c) > (int64_t)(size - n))
				return -FI_EAGAIN;
		}
		old = fi_xpu_arch_cas_u64(&ep->prod, p, p + n, FI_XPU_ARCH_ACQ_REL, FI_XPU_OFI_SYS);
		if (old == p) {
			*pos = p;
			return 0;
		}
		p = old;
	}
}

/* Writes the claimed entry at `pos` and publishes it: `seq` last, with
 * release order at system scope. With FI_INJECT (checked by the caller
 * with fi_xpu_ofi_inject_bytes) the source and compare bytes are copied
 * into the entry's staging slot first, where the proxy reads them: the
 * caller may reuse its buffers once this returns. */
FI_XPU_FUNC void fi_xpu_ofi_fill(struct fi_xpu_ofi_ep_dev *ep, uint64_t pos,
				 const struct fi_xpu_ofi_wqe *w)
{
	struct fi_xpu_ofi_wqe *e =
		FI_XPU_OFI_P(struct fi_xpu_ofi_wqe, ep->ring) + (pos & (ep->size - 1));
	unsigned char *stage = FI_XPU_I_NULL;
	if (w->flags & FI_INJECT) {
		int64_t n = fi_xpu_ofi_inject_bytes(w);
		stage = FI_XPU_OFI_P(unsigned char, ep->stage) +
			(pos & (ep->size - 1)) * 2 * ep->inject_size;
		if (n > 0) {
			fi_xpu_ofi_copy_bytes(stage, FI_XPU_OFI_P(const void, w->buf), (size_t)n);
			if (w->op == FI_XPU_OFI_OP_COMPARE_ATOMIC)
				fi_xpu_ofi_copy_bytes(stage + ep->inject_size,
						      FI_XPU_OFI_P(const void, w->compare),
						      (size_t)n);
		}
	}
	e->op = w->op;
	e->atomic = w->atomic;
	e->flags = w->flags;
	e->addr = w->addr;
	e->buf = w->buf;
	e->len = w->len;
	e->desc = w->desc;
	e->raddr = w->raddr;
	e->rkey = w->rkey;
	e->context = w->context;
	e->data = w->data;
	e->tag = w->tag;
	e->ignore = w->ignore;
	e->compare = w->compare;
	e->result = w->result;
	e->result_desc = w->result_desc;
	if (stage) {
		/* For the reader's eyes: the proxy finds the slot by position. */
		e->buf = (uint64_t)(uintptr_t)stage;
		e->desc = 0;
		if (w->op == FI_XPU_OFI_OP_COMPARE_ATOMIC)
			e->compare = (uint64_t)(uintptr_t)(stage + ep->inject_size);
	}
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_RING, fi_xpu_ofi_st(&e->seq, pos + 1));
}

/* The doorbell: wakes the proxy if it announced it sleeps, after entries
 * were published. */
FI_XPU_FUNC void fi_xpu_ofi_ring(struct fi_xpu_ofi_ep_dev *ep)
{
#ifdef FI_XPU_I_OFI_WAKE
	/* Pairs with the proxy's store of `sleeping` and its re-check of the
	 * ring: either it sees the entries or this poster sees it sleeping. Only
	 * the first poster to clear the flag pays for the system call. A GPU
	 * cannot make one, so device builds skip the handshake (and its
	 * system-scope fence); the proxy polls their rings instead. */
	fi_xpu_arch_fence(FI_XPU_ARCH_SEQ_CST, FI_XPU_OFI_SYS);
	if (fi_xpu_arch_load_u32(&ep->sleeping, FI_XPU_ARCH_RELAXED, FI_XPU_OFI_SYS) &&
	    fi_xpu_arch_exchange_u32(&ep->sleeping, 0, FI_XPU_ARCH_SEQ_CST, FI_XPU_OFI_SYS)) {
		uint64_t one = 1;
		/* Ordered after the entries by the exchange above. */
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_DOORBELL,
				 fi_xpu_arch_fetch_add_u32(&ep->doorbell, 1, FI_XPU_ARCH_RELAXED,
							   FI_XPU_OFI_SYS));
		if (ep->wake_fd >= 0)
			(void)syscall(SYS_write, ep->wake_fd, &one, sizeof one);
	}
#else
	(void)ep;
#endif
}

/* Posts one work request per member of the scope group: the leader claims
 * the group's run of slots with one atomic and broadcasts its start, every
 * member writes its own entry at start + rank, and the leader rings once
 * when all are published. `own` is the caller's argument check: a member
 * whose arguments were refused fills its slot with a no-op (the proxy
 * skips it without a completion) and gets `own` back; the others get 0.
 * A full ring, or a group larger than the ring, is the whole group's
 * result: nothing is posted then. */
FI_XPU_FUNC int fi_xpu_ofi_submit(const struct fid_xpu_ep *hep, const struct fi_xpu_ofi_wqe *w,
				  int own, int scope, const char *call)
{
	struct fi_xpu_ofi_ep_dev *ep = fi_xpu_ofi_ep(hep);
	struct fi_xpu_group g;
	uint64_t pos = 0;
	int64_t rc = fi_xpu_group_enter(&g, scope, call);
	if (rc)
		return (int)rc;
	/* FI_INJECT: at most `inject_size` source bytes, and only for
	 * operations with a source. */
	if (!own && ep && (w->flags & FI_INJECT)) {
		int64_t n = fi_xpu_ofi_inject_bytes(w);
		if (n < 0)
			own = (int)n;
		else if (!ep->stage || (uint64_t)n > ep->inject_size)
			own = -FI_EMSGSIZE;
	}
	/* FI_COMPLETION with no CQ bound for transmit: the completion would go
	 * nowhere, and whoever waits for it would wait forever. */
	if (!own && ep && (w->flags & FI_COMPLETION) && !ep->tx_cq &&
	    (w->op == FI_XPU_OFI_OP_WRITE || w->op == FI_XPU_OFI_OP_READ))
		own = -FI_ENOCQ;
	if (g.size == 1 && own)
		return own;
	if (fi_xpu_group_leader(&g))
		rc = ep ? fi_xpu_ofi_claim(ep, g.size, &pos) : -FI_EINVAL;
	/* Ring positions stay far below 2^63, so one word carries either. */
	pos = fi_xpu_group_bcast(&g, rc ? (uint64_t)rc : pos);
	if ((int64_t)pos < 0)
		return (int)(int64_t)pos;
	if (own) {
		struct fi_xpu_ofi_wqe nop = fi_xpu_ofi_wqe_zero();
		nop.op = FI_XPU_OFI_OP_NOP;
		fi_xpu_ofi_fill(ep, pos + g.rank, &nop);
	} else {
		fi_xpu_ofi_fill(ep, pos + g.rank, w);
	}
	fi_xpu_group_sync(&g);
	/* FI_MORE: the doorbell waits for a later post or fi_xpu_flush_wr. */
	if (fi_xpu_group_leader(&g) && !(w->flags & FI_MORE))
		fi_xpu_ofi_ring(ep);
	return own;
}

#endif /* FI_XPU_INCLUDED_OFI_OFI_POST_H */
