/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device API: work requests (extensions: the device side of
 * libfabric's WR API).
 * Part of <fi_xpu/device.h>, which states the contract and the dispatch;
 * included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_H
#include <fi_xpu/device.h>
#endif
#ifndef FI_XPU_INCLUDED_DEVICE_DEVICE_WR_H
#define FI_XPU_INCLUDED_DEVICE_DEVICE_WR_H

/* ---- work requests (extensions: the device side of libfabric's WR API) -- */

/*
 * A work request prepared on the host (fi_xpu_prepare_wr, or fi_control
 * with FI_PREPARE_WORK, from libfabric's struct fi_wr_attr) into memory
 * the device can read, in the layout of <fi_xpu/wr.h>:
 *   fi_xpu_wr_set_*      modify it before it is queued
 *   fi_xpu_queue_wr      posts the operation it describes, with FI_MORE: a
 *                        provider may hold back its doorbell until
 *                        fi_xpu_flush_wr (the ofi provider does; shm
 *                        operations are done when they return)
 *   fi_xpu_flush_wr      commits every request queued on the endpoint
 * Scopes as for every operation: each member queues its own request. A
 * member whose request is not a prepared request of this library version
 * for this endpoint's provider (or wr_len is short of FI_XPU_WR_SIZE) gets
 * -FI_EINVAL and still takes part in the group; otherwise it gets what the
 * operation returns.
 */
#define FI_XPU_I_WR_WORD (FI_XPU_WR_MAGIC | (uint64_t)FI_XPU_API_VERSION)

FI_XPU_FUNC struct fi_xpu_wr *fi_xpu_i_wr(void *wr_buf)
{
	struct fi_xpu_wr *w = (struct fi_xpu_wr *)wr_buf;
	return w && w->magic == FI_XPU_I_WR_WORD ? w : FI_XPU_I_NULL;
}

/* Setters: 0, or -FI_EINVAL when wr_buf holds no prepared request. The
 * registration (desc) of the prepared buffer stays: a new buffer must lie
 * in it. For atomics `len` is the element count. */
FI_XPU_FUNC int fi_xpu_wr_set_buf(void *wr_buf, void *buf, size_t len)
{
	struct fi_xpu_wr *w = fi_xpu_i_wr(wr_buf);
	if (!w)
		return -FI_EINVAL;
	w->buf = (uint64_t)(uintptr_t)buf;
	w->len = len;
	return 0;
}

FI_XPU_FUNC int fi_xpu_wr_set_remote(void *wr_buf, uint64_t addr)
{
	struct fi_xpu_wr *w = fi_xpu_i_wr(wr_buf);
	if (!w)
		return -FI_EINVAL;
	w->addr = addr;
	return 0;
}

FI_XPU_FUNC int fi_xpu_wr_set_data(void *wr_buf, uint64_t data)
{
	struct fi_xpu_wr *w = fi_xpu_i_wr(wr_buf);
	if (!w)
		return -FI_EINVAL;
	w->data = data;
	return 0;
}

FI_XPU_FUNC int fi_xpu_wr_set_tag(void *wr_buf, uint64_t tag)
{
	struct fi_xpu_wr *w = fi_xpu_i_wr(wr_buf);
	if (!w)
		return -FI_EINVAL;
	w->tag = tag;
	return 0;
}

FI_XPU_FUNC int fi_xpu_wr_set_context(void *wr_buf, void *context)
{
	struct fi_xpu_wr *w = fi_xpu_i_wr(wr_buf);
	if (!w)
		return -FI_EINVAL;
	w->context = (uint64_t)(uintptr_t)context;
	return 0;
}

FI_XPU_FUNC int fi_xpu_queue_wr(struct fid_xpu_ep *ep, void *wr_buf, size_t wr_len, int scope)
{
	struct fi_xpu_wr *w = wr_len >= sizeof(struct fi_xpu_wr) ? fi_xpu_i_wr(wr_buf)
								  : FI_XPU_I_NULL;
	void *peer, *desc, *ctx, *buf;
	uint64_t flags;
	if (!w || !ep || w->prov_id != ep->fid.prov_id)
		w = FI_XPU_I_NULL;
	if (!w) {
		/* Refused: -FI_EINVAL from the write every provider refuses
		 * alike, so that a group still meets. */
		if (scope == FI_XPU_WORK_ITEM)
			return -FI_EINVAL;
		return fi_xpu_write(ep, FI_XPU_I_NULL, 1, FI_XPU_I_NULL, 0, FI_XPU_I_NULL, 0, 0,
				    FI_XPU_I_NULL, 0, scope);
	}
	peer = (w->present & FI_XPU_WR_PEER) ? (void *)w->peer : FI_XPU_I_NULL;
	desc = (w->present & FI_XPU_WR_DESC) ? (void *)w->desc : FI_XPU_I_NULL;
	ctx = (void *)(uintptr_t)w->context;
	buf = (void *)(uintptr_t)w->buf;
	flags = w->flags | FI_MORE;
	switch (w->op_type) {
	case FI_XPU_WR_OP_WRITE:
		return fi_xpu_write(ep, buf, w->len, desc, w->data, peer, w->addr, w->key, ctx, flags,
				    scope);
	case FI_XPU_WR_OP_READ:
		return fi_xpu_read(ep, buf, w->len, desc, peer, w->addr, w->key, ctx, flags, scope);
	case FI_XPU_WR_OP_SEND:
		return fi_xpu_send(ep, buf, w->len, desc, w->data, peer, ctx, flags, scope);
	case FI_XPU_WR_OP_TSEND:
		return fi_xpu_tsend(ep, buf, w->len, desc, w->data, peer, w->tag, ctx, flags, scope);
	case FI_XPU_WR_OP_RECV:
		return fi_xpu_recv(ep, buf, w->len, desc, peer, ctx, flags, scope);
	case FI_XPU_WR_OP_TRECV:
		return fi_xpu_trecv(ep, buf, w->len, desc, peer, w->tag, w->ignore, ctx, flags, scope);
	case FI_XPU_WR_OP_ATOMIC:
		return fi_xpu_atomic(ep, buf, w->len, desc, peer, w->addr, w->key, (int)w->datatype,
				     (int)w->atomic_op, ctx, flags, scope);
	case FI_XPU_WR_OP_FETCH_ATOMIC:
		return fi_xpu_fetch_atomic(
			ep, buf, w->len, desc, (void *)(uintptr_t)w->result,
			(w->present & FI_XPU_WR_RESULT_DESC) ? (void *)w->result_desc : FI_XPU_I_NULL,
			peer, w->addr, w->key, (int)w->datatype, (int)w->atomic_op, ctx, flags, scope);
	default: /* FI_XPU_WR_OP_COMPARE_ATOMIC: the host prepares no other */
		return fi_xpu_compare_atomic(
			ep, buf, w->len, desc, (const void *)(uintptr_t)w->compare,
			(w->present & FI_XPU_WR_COMPARE_DESC) ? (void *)w->compare_desc : FI_XPU_I_NULL,
			(void *)(uintptr_t)w->result,
			(w->present & FI_XPU_WR_RESULT_DESC) ? (void *)w->result_desc : FI_XPU_I_NULL,
			peer, w->addr, w->key, (int)w->datatype, (int)w->atomic_op, ctx, flags, scope);
	}
}

/* A case for each provider that commits queued requests itself
 * (FI_XPU_DEVICE_WR_<name> defined as "~, 1" and fi_xpu_flush_wr_<name>);
 * for the others queued requests are already under way. */
#define FI_XPU_I_DEVICE_WR_CASE(p)                                             \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_WR_##p))(        \
		case FI_XPU_DEVICE_ID_##p: return fi_xpu_flush_wr_##p(ep, scope);)
#define FI_XPU_I_DEVICE_WR_OTHER(p)                                            \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_NOT(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_WR_##p)))( \
		case FI_XPU_DEVICE_ID_##p:)
#define FI_XPU_I_DEVICE_NOT(c) FI_XPU_I_DEVICE_NOT_(c)
#define FI_XPU_I_DEVICE_NOT_(c) FI_XPU_I_DEVICE_NOT_##c
#define FI_XPU_I_DEVICE_NOT_0 1
#define FI_XPU_I_DEVICE_NOT_1 0

FI_XPU_FUNC int fi_xpu_flush_wr(struct fid_xpu_ep *ep, int scope)
{
	struct fi_xpu_group g;
	int rc;
	if (!ep || ep->fid.fclass != (uint32_t)FI_CLASS_EP || (unsigned)scope > (unsigned)FI_XPU_DEVICE)
		return -FI_EINVAL;
	switch (ep->fid.prov_id) {
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_WR_CASE)
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_WR_OTHER)
		break;
	default:
		return -FI_ENOSYS;
	}
	rc = fi_xpu_group_enter(&g, scope, "fi_xpu_flush_wr");
	if (rc)
		return rc;
	return fi_xpu_group_leave(&g, 0);
}

#endif /* FI_XPU_INCLUDED_DEVICE_DEVICE_WR_H */
