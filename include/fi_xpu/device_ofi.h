/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu ofi provider, device side: every data-path operation of
 * <fi_xpu/device.h> for endpoints, CQs and counters of the ofi provider
 * (prov_id FI_XPU_PROV_OFI). Operations become 128-byte work requests in a
 * ring in host-visible memory; a proxy thread of the host library issues
 * them on a libfabric endpoint and writes completions and counters back
 * (see fi_xpu_ofi(7) for the ring format).
 *
 * Header-only, written against <fi_xpu/device_arch.h>; no libc on
 * device paths (the host XPU build wakes a sleeping proxy through its eventfd).
 *
 * Raw handles:
 *   dest_addr  points to the 8 bytes fi_xpu_av_lookup wrote (the peer's
 *              libfabric fi_addr_t). For receives, NULL means any source.
 *   desc       points to the 32 bytes fi_xpu_mr_desc wrote, or is NULL.
 *
 * Semantics match the shm provider: arguments a caller can check (NULL
 * handle, NULL buffer with a length) return -FI_EINVAL at once; everything
 * else the proxy finds wrong becomes an error completion on the endpoint's
 * CQ and counter. A full ring returns -FI_EAGAIN and posts nothing.
 * Operations complete asynchronously: wait on the CQ or counter, or call
 * fi_xpu_flush, before reusing a source buffer or reading a result.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_OFI_H
#define FI_XPU_INCLUDED_DEVICE_OFI_H

#include <fi_xpu/device_arch.h>
#include <fi_xpu/device_coop.h>
#include <fi_xpu/device_check.h>
#include <fi_xpu/device_handle.h>
#include <fi_xpu/device_group.h>

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

#ifndef FI_XPU_DEVICE_ID_ofi
#define FI_XPU_DEVICE_ID_ofi FI_XPU_PROV_OFI
#endif

#ifndef FI_ADDR_UNSPEC
#define FI_ADDR_UNSPEC ((uint64_t)-1)
#endif
#ifndef FI_ADDR_NOTAVAIL
#define FI_ADDR_NOTAVAIL ((uint64_t)-1)
#endif

/* How long fi_xpu_flush waits for the proxy at most. */
#ifndef FI_XPU_OFI_FLUSH_TIMEOUT_MS
#define FI_XPU_OFI_FLUSH_TIMEOUT_MS 60000
#endif

/* ---- shared layouts (twins of providers/ofi/src/layout.rs) ------------ */

enum {
	FI_XPU_OFI_OP_WRITE = 1,
	FI_XPU_OFI_OP_READ = 2,
	FI_XPU_OFI_OP_SEND = 3,
	FI_XPU_OFI_OP_RECV = 4,
	FI_XPU_OFI_OP_TSEND = 5,
	FI_XPU_OFI_OP_TRECV = 6,
	FI_XPU_OFI_OP_ATOMIC = 7,
	FI_XPU_OFI_OP_FETCH_ATOMIC = 8,
	FI_XPU_OFI_OP_COMPARE_ATOMIC = 9,
	FI_XPU_OFI_OP_NOP = 10,
	/* write, then the signal word (tag: address, ignore: key, data: value,
	 * atomic: FI_XPU_SIGNAL_SET or _ADD) once the write is complete */
	FI_XPU_OFI_OP_PUT_SIGNAL = 11,
	/* later entries wait until earlier transmits completed */
	FI_XPU_OFI_OP_FENCE = 12
};

/* One work request. `seq` (ring position + 1) is written last. */
struct fi_xpu_ofi_wqe {
	uint64_t seq;
	uint32_t op;
	uint32_t atomic; /* datatype | op << 16 */
	uint64_t flags, addr, buf, len, desc, raddr, rkey, context, data, tag, ignore;
	uint64_t compare, result, result_desc;
};

struct fi_xpu_ofi_ep_dev {
	uint64_t magic, ring, size, caps, tx_cq, rx_cq;
	uint64_t cntr[6];
	uint64_t max_msg, inject_size, stage;
	uint64_t abort; /* the context's abort word, fi_xpu/device_handle.h */
	uint64_t prod, p1[7];
	uint64_t cons_cache, p2[7];
	uint64_t cons, flushed, p3[6];
	uint32_t doorbell, sleeping;
	int32_t wake_fd;
	uint32_t p4a;
	uint64_t p4[6];
};

struct fi_xpu_ofi_cq_dev {
	uint64_t magic, ring, size, format;
	int64_t timeout_ms;
	uint64_t overflow;
	uint64_t abort; /* the context's abort word, fi_xpu/device_handle.h */
	uint64_t p0;
	uint64_t head, p1[7];
	uint64_t tail, p2[7];
};

struct fi_xpu_ofi_cqe {
	uint64_t seq, flags, context, len, buf, data, tag;
	int64_t err;
	uint64_t olen, src, is_err;
	int64_t prov_errno;
};

struct fi_xpu_ofi_cntr {
	uint64_t value, err, magic;
	uint64_t abort; /* the context's abort word, fi_xpu/device_handle.h */
	uint64_t pad[4];
};

struct fi_xpu_ofi_mr_desc {
	uint64_t id, key, base, len;
};

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

/* ---- RMA, messages, atomics ------------------------------------------- */
FI_XPU_FUNC int fi_xpu_write_ofi(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, void *dest_addr, uint64_t addr, uint64_t key,
				 void *context, uint64_t flags, int scope)
{
	struct fi_xpu_ofi_wqe w = fi_xpu_ofi_wqe_zero();
	int own = fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_WRITE_FLAGS);
	if (!own && ((!buf && len) || !dest_addr))
		own = -FI_EINVAL;
	if (!ep)
		return -FI_EINVAL;
	w.op = FI_XPU_OFI_OP_WRITE;
	w.flags = flags;
	w.addr = fi_xpu_ofi_addr(dest_addr);
	w.buf = (uint64_t)(uintptr_t)buf;
	w.len = len;
	w.desc = fi_xpu_ofi_desc_id(desc);
	w.raddr = addr;
	w.rkey = key;
	w.context = (uint64_t)(uintptr_t)context;
	w.data = data;
	return fi_xpu_ofi_submit(ep, &w, own, scope, "fi_xpu_write");
}

FI_XPU_FUNC int fi_xpu_read_ofi(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				void *src_addr, uint64_t addr, uint64_t key, void *context,
				uint64_t flags, int scope)
{
	struct fi_xpu_ofi_wqe w = fi_xpu_ofi_wqe_zero();
	int own = fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_READ_FLAGS);
	if (!own && ((!buf && len) || !src_addr))
		own = -FI_EINVAL;
	if (!ep)
		return -FI_EINVAL;
	w.op = FI_XPU_OFI_OP_READ;
	w.flags = flags & ~(FI_REMOTE_CQ_DATA | FI_INJECT);
	w.addr = fi_xpu_ofi_addr(src_addr);
	w.buf = (uint64_t)(uintptr_t)buf;
	w.len = len;
	w.desc = fi_xpu_ofi_desc_id(desc);
	w.raddr = addr;
	w.rkey = key;
	w.context = (uint64_t)(uintptr_t)context;
	return fi_xpu_ofi_submit(ep, &w, own, scope, "fi_xpu_read");
}

FI_XPU_FUNC int fi_xpu_ofi_msg(struct fid_xpu_ep *ep, uint32_t op, const void *buf, size_t len,
			       void *desc, uint64_t data, uint64_t addr, uint64_t tag,
			       uint64_t ignore, void *context, uint64_t flags, int own,
			       int scope, const char *call)
{
	struct fi_xpu_ofi_wqe w = fi_xpu_ofi_wqe_zero();
	if (!ep)
		return -FI_EINVAL;
	if (!own && !buf && len)
		own = -FI_EINVAL;
	w.op = op;
	w.flags = flags;
	w.addr = addr;
	w.buf = (uint64_t)(uintptr_t)buf;
	w.len = len;
	w.desc = fi_xpu_ofi_desc_id(desc);
	w.context = (uint64_t)(uintptr_t)context;
	w.data = data;
	w.tag = tag;
	w.ignore = ignore;
	return fi_xpu_ofi_submit(ep, &w, own, scope, call);
}

FI_XPU_FUNC int fi_xpu_send_ofi(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				uint64_t data, void *dest_addr, void *context, uint64_t flags,
				int scope)
{
	return fi_xpu_ofi_msg(ep, FI_XPU_OFI_OP_SEND, buf, len, desc, data,
			      fi_xpu_ofi_addr(dest_addr), 0, 0, context, flags,
			      fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_SEND_FLAGS)
				      ? -FI_EBADFLAGS
				      : (dest_addr ? 0 : -FI_EINVAL),
			      scope, "fi_xpu_send");
}

FI_XPU_FUNC int fi_xpu_tsend_ofi(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, void *dest_addr, uint64_t tag, void *context,
				 uint64_t flags, int scope)
{
	return fi_xpu_ofi_msg(ep, FI_XPU_OFI_OP_TSEND, buf, len, desc, data,
			      fi_xpu_ofi_addr(dest_addr), tag, 0, context, flags,
			      fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_SEND_FLAGS)
				      ? -FI_EBADFLAGS
				      : (dest_addr ? 0 : -FI_EINVAL),
			      scope, "fi_xpu_tsend");
}

FI_XPU_FUNC int fi_xpu_recv_ofi(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				void *src_addr, void *context, uint64_t flags, int scope)
{
	return fi_xpu_ofi_msg(ep, FI_XPU_OFI_OP_RECV, buf, len, desc, 0,
			      fi_xpu_ofi_addr(src_addr), 0, 0, context,
			      flags & ~(FI_REMOTE_CQ_DATA | FI_INJECT),
			      fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_RECV_FLAGS), scope,
			      "fi_xpu_recv");
}

FI_XPU_FUNC int fi_xpu_trecv_ofi(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				 void *src_addr, uint64_t tag, uint64_t ignore, void *context,
				 uint64_t flags, int scope)
{
	return fi_xpu_ofi_msg(ep, FI_XPU_OFI_OP_TRECV, buf, len, desc, 0,
			      fi_xpu_ofi_addr(src_addr), tag, ignore, context,
			      flags & ~(FI_REMOTE_CQ_DATA | FI_INJECT),
			      fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_RECV_FLAGS), scope,
			      "fi_xpu_trecv");
}

FI_XPU_FUNC int fi_xpu_ofi_atomic_any(struct fid_xpu_ep *ep, uint32_t kind, const void *buf,
				      size_t count, void *desc, const void *compare,
				      void *result, void *result_desc, void *dest_addr,
				      uint64_t addr, uint64_t key, int datatype, int op,
				      void *context, uint64_t flags, int own, int scope,
				      const char *call)
{
	struct fi_xpu_ofi_wqe w = fi_xpu_ofi_wqe_zero();
	if (!ep)
		return -FI_EINVAL;
	if (!own && (!dest_addr || (!buf && op != FI_ATOMIC_READ) || datatype < 0 || op < 0))
		own = -FI_EINVAL;
	w.op = kind;
	w.atomic = (uint32_t)datatype | (uint32_t)op << 16;
	w.flags = flags & ~FI_REMOTE_CQ_DATA;
	w.addr = fi_xpu_ofi_addr(dest_addr);
	w.buf = (uint64_t)(uintptr_t)buf;
	w.len = count;
	w.desc = fi_xpu_ofi_desc_id(desc);
	w.raddr = addr;
	w.rkey = key;
	w.context = (uint64_t)(uintptr_t)context;
	w.compare = (uint64_t)(uintptr_t)compare;
	w.result = (uint64_t)(uintptr_t)result;
	w.result_desc = fi_xpu_ofi_desc_id(result_desc);
	return fi_xpu_ofi_submit(ep, &w, own, scope, call);
}

FI_XPU_FUNC int fi_xpu_atomic_ofi(struct fid_xpu_ep *ep, const void *buf, size_t count,
				  void *desc, void *dest_addr, uint64_t addr, uint64_t key,
				  int datatype, int op, void *context,
				  uint64_t flags, int scope)
{
	int own = fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_ATOMIC_FLAGS, count, addr,
					     (int)datatype, 0);
	if (!own && (op == FI_ATOMIC_READ || (op >= FI_CSWAP && op <= FI_MSWAP)))
		own = -FI_EINVAL;
	return fi_xpu_ofi_atomic_any(ep, FI_XPU_OFI_OP_ATOMIC, buf, count, desc, FI_XPU_I_NULL,
				     FI_XPU_I_NULL, FI_XPU_I_NULL, dest_addr, addr, key, (int)datatype,
				     (int)op, context, flags, own, scope, "fi_xpu_atomic");
}

FI_XPU_FUNC int fi_xpu_fetch_atomic_ofi(struct fid_xpu_ep *ep, const void *buf, size_t count,
					void *desc, void *result, void *result_desc,
					void *dest_addr, uint64_t addr, uint64_t key,
					int datatype, int op, void *context,
					uint64_t flags, int scope)
{
	int own = fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count, addr,
					     (int)datatype, !result);
	if (!own && op >= FI_CSWAP && op <= FI_MSWAP)
		own = -FI_EINVAL;
	return fi_xpu_ofi_atomic_any(ep, FI_XPU_OFI_OP_FETCH_ATOMIC, buf, count, desc,
				     FI_XPU_I_NULL, result, result_desc, dest_addr, addr, key,
				     (int)datatype, (int)op, context, flags, own, scope,
				     "fi_xpu_fetch_atomic");
}

FI_XPU_FUNC int fi_xpu_compare_atomic_ofi(struct fid_xpu_ep *ep, const void *buf, size_t count,
					  void *desc, const void *compare, void *compare_desc,
					  void *result, void *result_desc, void *dest_addr,
					  uint64_t addr, uint64_t key, int datatype,
					  int op, void *context, uint64_t flags, int scope)
{
	int own = fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count, addr,
					     (int)datatype, !result || !compare);
	if (!own && (op < FI_CSWAP || op > FI_MSWAP))
		own = -FI_EINVAL;
	(void)compare_desc;
	return fi_xpu_ofi_atomic_any(ep, FI_XPU_OFI_OP_COMPARE_ATOMIC, buf, count, desc, compare,
				     result, result_desc, dest_addr, addr, key, (int)datatype,
				     (int)op, context, flags, own, scope, "fi_xpu_compare_atomic");
}

/* Waits until the proxy has issued every entry posted before the call and
 * libfabric has completed every transmit operation among them. */
FI_XPU_FUNC int fi_xpu_flush_ofi(struct fid_xpu_ep *hep, uint64_t flags, int scope)
{
	struct fi_xpu_ofi_ep_dev *ep = fi_xpu_ofi_ep(hep);
	struct fi_xpu_group g;
	int64_t rc = fi_xpu_group_enter(&g, scope, "fi_xpu_flush");
	(void)flags;
	if (rc)
		return (int)rc;
	if (!ep)
		return -FI_EINVAL;
	/* Every member's earlier posts are in the ring before the snapshot. */
	fi_xpu_group_sync(&g);
	if (fi_xpu_group_leader(&g)) {
		uint64_t snap = fi_xpu_ofi_ld(&ep->prod), start = fi_xpu_arch_clock_ns(), next = 0;
		while (fi_xpu_ofi_poll(&ep->flushed) < snap) {
			uint64_t now = fi_xpu_arch_clock_ns();
			if (now - start >= (uint64_t)FI_XPU_OFI_FLUSH_TIMEOUT_MS * (uint64_t)1000000) {
				rc = -FI_ETIMEDOUT;
				break;
			}
			if (fi_xpu_i_abort_due(ep->abort, now, &next)) {
				rc = FI_XPU_ABORT_ERR;
				break;
			}
			fi_xpu_arch_pause();
		}
		fi_xpu_ofi_acq();
	}
	return (int)fi_xpu_group_share(&g, rc);
}

/* ---- put with signal, fence, quiet, direct pointers -------------------
 * One ring entry carries a put-with-signal whole: the proxy writes the data
 * with delivery complete and posts the signal atomic once libfabric reports
 * the data placed (see fi_xpu_ofi(7), ORDERING). */
#define FI_XPU_DEVICE_SIGNAL_ofi ~, 1

FI_XPU_FUNC int fi_xpu_put_signal_ofi(struct fid_xpu_ep *ep, const void *buf, size_t len,
				      void *desc, void *dest_addr, uint64_t addr, uint64_t key,
				      uint64_t sig_addr, uint64_t sig_key, uint64_t signal,
				      int sig_op, void *context, uint64_t flags, int scope)
{
	struct fi_xpu_ofi_wqe w = fi_xpu_ofi_wqe_zero();
	int own = fi_xpu_device_check_put_signal(flags, sig_addr, sig_op);
	if (!own && ((!buf && len) || !dest_addr))
		own = -FI_EINVAL;
	if (!ep)
		return -FI_EINVAL;
	w.op = FI_XPU_OFI_OP_PUT_SIGNAL;
	w.atomic = (uint32_t)sig_op;
	w.flags = flags;
	w.addr = fi_xpu_ofi_addr(dest_addr);
	w.buf = (uint64_t)(uintptr_t)buf;
	w.len = len;
	w.desc = fi_xpu_ofi_desc_id(desc);
	w.raddr = addr;
	w.rkey = key;
	w.context = (uint64_t)(uintptr_t)context;
	w.data = signal;
	w.tag = sig_addr;
	w.ignore = sig_key;
	return fi_xpu_ofi_submit(ep, &w, own, scope, "fi_xpu_put_signal");
}

/* One fence entry for the group, after every member's earlier posts: the
 * proxy holds a later transmit back until the earlier ones to its peer
 * completed; operations to other peers go ahead. */
FI_XPU_FUNC int fi_xpu_fence_ofi(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	struct fi_xpu_group g;
	struct fi_xpu_ofi_wqe w = fi_xpu_ofi_wqe_zero();
	int64_t rc = fi_xpu_group_enter(&g, scope, "fi_xpu_fence");
	(void)flags;
	if (rc)
		return (int)rc;
	if (!fi_xpu_ofi_ep(ep))
		return -FI_EINVAL;
	fi_xpu_group_sync(&g);
	w.op = FI_XPU_OFI_OP_FENCE;
	if (fi_xpu_group_leader(&g))
		rc = fi_xpu_ofi_submit(ep, &w, 0, FI_XPU_WORK_ITEM, "fi_xpu_fence");
	return (int)fi_xpu_group_share(&g, rc);
}

/* Complete means what fi_xpu_flush waits for: issued, and reported
 * complete by libfabric (a put-with-signal: its signal placed). */
FI_XPU_FUNC int fi_xpu_quiet_ofi(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	return fi_xpu_flush_ofi(ep, flags, scope);
}

/* The proxy's transport moves the data: there is no pointer to give. */
FI_XPU_FUNC void *fi_xpu_peer_ptr_ofi(struct fid_xpu_ep *ep, void *dest_addr, uint64_t addr,
				      uint64_t key, size_t len)
{
	(void)ep;
	(void)dest_addr;
	(void)addr;
	(void)key;
	(void)len;
	return FI_XPU_I_NULL;
}

/* Commits requests queued with FI_MORE (fi_xpu_queue_wr): the leader rings
 * the doorbell once for the group. */
#define FI_XPU_DEVICE_WR_ofi ~, 1
FI_XPU_FUNC int fi_xpu_flush_wr_ofi(struct fid_xpu_ep *hep, int scope)
{
	struct fi_xpu_ofi_ep_dev *ep = fi_xpu_ofi_ep(hep);
	struct fi_xpu_group g;
	int rc = fi_xpu_group_enter(&g, scope, "fi_xpu_flush_wr");
	if (rc)
		return rc;
	if (ep && fi_xpu_group_leader(&g))
		fi_xpu_ofi_ring(ep);
	return fi_xpu_group_leave(&g, ep ? 0 : -FI_EINVAL);
}

/* ---- completion queues ------------------------------------------------ */
FI_XPU_FUNC size_t fi_xpu_ofi_entry_size(uint64_t format)
{
	return format == FI_CQ_FORMAT_MSG    ? sizeof(struct fi_cq_msg_entry)
	     : format == FI_CQ_FORMAT_DATA   ? sizeof(struct fi_cq_data_entry)
	     : format == FI_CQ_FORMAT_TAGGED ? sizeof(struct fi_cq_tagged_entry)
					     : sizeof(struct fi_cq_entry);
}

FI_XPU_FUNC struct fi_xpu_ofi_cqe *fi_xpu_ofi_cqe_at(struct fi_xpu_ofi_cq_dev *q, uint64_t pos)
{
	return FI_XPU_OFI_P(struct fi_xpu_ofi_cqe, q->ring) + (pos & (q->size - 1));
}

/* Whether the CQ's next entry is not there yet: two relaxed words (the
 * head and that entry's sequence), no fence, inlined into the caller's
 * poll loop; the read itself (fi_xpu_ofi_cq_read_work) is out of line. */
FI_XPU_FUNC int fi_xpu_ofi_cq_empty(struct fi_xpu_ofi_cq_dev *q)
{
	uint64_t h = fi_xpu_ofi_poll(&q->head);
	return fi_xpu_ofi_poll(&fi_xpu_ofi_cqe_at(q, h)->seq) != h + 1;
}

FI_XPU_POLL_WORK_FUNC int64_t fi_xpu_ofi_cq_read_work(struct fi_xpu_ofi_cq_dev *q, void *buf,
						     size_t count, uint64_t *src_addr)
{
	size_t n = 0, esz;
	int64_t rc = 0;
	{
		esz = fi_xpu_ofi_entry_size(q->format);
		while (n < count) {
			uint64_t h = fi_xpu_ofi_poll(&q->head), seen;
			struct fi_xpu_ofi_cqe *e = fi_xpu_ofi_cqe_at(q, h);
			struct fi_cq_tagged_entry out;
			uint64_t src;
			/* Two relaxed words when empty; one fence for an entry. */
			if (fi_xpu_ofi_poll(&e->seq) != h + 1)
				break;
			fi_xpu_ofi_acq();
			if (e->is_err) {
				if (n == 0)
					rc = -FI_EAVAIL;
				break;
			}
			out.op_context = FI_XPU_OFI_P(void, e->context);
			out.flags = e->flags;
			out.len = (size_t)e->len;
			out.buf = FI_XPU_OFI_P(void, e->buf);
			out.data = e->data;
			out.tag = e->tag;
			src = e->src;
			/* Hands the slot back to the proxy; release only:
			 * the fence above ordered the entry's reads. */
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ,
					 seen = fi_xpu_arch_cas_u64(&q->head, h, h + 1,
								    FI_XPU_ARCH_RELEASE, FI_XPU_OFI_SYS));
			if (seen != h)
				continue;
			fi_xpu_ofi_copy_bytes((unsigned char *)buf + n * esz, &out, esz);
			if (src_addr)
				src_addr[n] = src;
			n++;
		}
		if (rc == 0)
			rc = n ? (int64_t)n : -FI_EAGAIN;
	}
	return rc;
}

/* CQ reads, for one work item (the leader of a group). */
FI_XPU_FUNC int64_t fi_xpu_ofi_cq_read_item(const struct fid_xpu_cq *hcq, void *buf, size_t count,
					    uint64_t *src_addr)
{
	struct fi_xpu_ofi_cq_dev *q = fi_xpu_ofi_cq(hcq);
	if (!q || (!buf && count))
		return -FI_EINVAL;
	if (count == 0 || fi_xpu_ofi_cq_empty(q))
		return -FI_EAGAIN;
	return fi_xpu_ofi_cq_read_work(q, buf, count, src_addr);
}

FI_XPU_FUNC int64_t fi_xpu_ofi_cq_readerr_item(const struct fid_xpu_cq *cq, void *buf)
{
	struct fi_xpu_ofi_cq_dev *q;
	struct fi_cq_err_entry *out = (struct fi_cq_err_entry *)buf;
	int64_t rc;
	q = fi_xpu_ofi_cq(cq);
	if (!q || !out)
		return -FI_EINVAL;
	rc = -FI_EAGAIN;
	{
		for (;;) {
			uint64_t h = fi_xpu_ofi_poll(&q->head), seen;
			struct fi_xpu_ofi_cqe *e = fi_xpu_ofi_cqe_at(q, h);
			struct fi_cq_err_entry o;
			if (fi_xpu_ofi_poll(&e->seq) != h + 1)
				break;
			fi_xpu_ofi_acq();
			if (!e->is_err)
				break;
			o.op_context = FI_XPU_OFI_P(void, e->context);
			o.flags = e->flags;
			o.len = (size_t)e->len;
			o.buf = FI_XPU_OFI_P(void, e->buf);
			o.data = e->data;
			o.tag = e->tag;
			o.olen = (size_t)e->olen;
			/* libfabric reports a positive errno here. */
			o.err = (int)-e->err;
			o.prov_errno = e->prov_errno ? (int)e->prov_errno : (int)e->err;
			o.err_data = FI_XPU_I_NULL;
			o.err_data_size = 0;
			/* Hands the slot back to the proxy; release only:
			 * the fence above ordered the entry's reads. */
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ,
					 seen = fi_xpu_arch_cas_u64(&q->head, h, h + 1,
								    FI_XPU_ARCH_RELEASE, FI_XPU_OFI_SYS));
			if (seen != h)
				continue;
			*out = o;
			rc = 1;
			break;
		}
	}
	return rc;
}

/* Blocking read: waits until `threshold` entries (at least one, at most
 * `count`) were read or an error entry is next, for at most the CQ's
 * timeout (negative: no limit); -FI_ETIMEDOUT when nothing came. */
FI_XPU_FUNC int64_t fi_xpu_ofi_cq_sread_item(const struct fid_xpu_cq *cq, void *buf, size_t count,
					     void *src_addr, uint64_t threshold)
{
	const struct fi_xpu_ofi_cq_dev *q = fi_xpu_ofi_cq(cq);
	if (!q || (!buf && count))
		return -FI_EINVAL;
	FI_XPU_GROUP_SREAD(fi_xpu_ofi_cq_read_item, cq, buf, count, src_addr, threshold,
			   q->timeout_ms, fi_xpu_ofi_entry_size(q->format), q->abort);
}

FI_XPU_FUNC int64_t fi_xpu_ofi_cq_readerr_flags(const struct fid_xpu_cq *cq, void *buf,
						uint64_t flags)
{
	(void)flags;
	return fi_xpu_ofi_cq_readerr_item(cq, buf);
}

/* A group reads a CQ once: the leader reads into the buffer the group
 * shares and every member gets the leader's count or error. */
FI_XPU_GROUP_CQ_ENTRY_POINTS(ofi, fi_xpu_ofi_cq_read_item, fi_xpu_ofi_cq_readerr_flags,
			     fi_xpu_ofi_cq_sread_item)

/* ---- counters ------------------------------------------------------------ */
FI_XPU_FUNC uint64_t *fi_xpu_ofi_cntr_value(const struct fid_xpu_cntr *c)
{
	struct fi_xpu_ofi_cntr *k = c ? FI_XPU_OFI_P(struct fi_xpu_ofi_cntr, c->fid.prov_ctx)
				      : FI_XPU_I_NULL;
	return k && fi_xpu_handle_live(&k->magic, FI_XPU_HANDLE_CNTR) ? &k->value : FI_XPU_I_NULL;
}

/* The abort word of the counter's context (0: none). */
FI_XPU_FUNC uint64_t fi_xpu_ofi_cntr_abort(const struct fid_xpu_cntr *c)
{
	uint64_t *k = fi_xpu_ofi_cntr_value(c);
	return k ? ((const struct fi_xpu_ofi_cntr *)(void *)k)->abort : 0;
}

/* Its words for fi_xpu/device_group.h: one pair, which the proxy and
 * device code update (no second pair). */
FI_XPU_FUNC uint64_t *fi_xpu_ofi_cntr_words(const struct fid_xpu_cntr *c, const uint64_t **remote)
{
	*remote = FI_XPU_I_NULL;
	return fi_xpu_ofi_cntr_value(c);
}

FI_XPU_GROUP_CNTR_ENTRY_POINTS(ofi, fi_xpu_ofi_cntr_words, fi_xpu_ofi_cntr_abort, FI_XPU_OFI_SYS)

#endif /* FI_XPU_INCLUDED_DEVICE_OFI_H */
