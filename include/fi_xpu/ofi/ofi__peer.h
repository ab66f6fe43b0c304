/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu ofi provider, device side: what orders and completes a peer's
 * operations: flush, put with signal, fence, quiet, direct pointers and
 * the doorbell of work requests posted with FI_MORE.
 * Part of <fi_xpu/device_ofi.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_OFI_OFI_PEER_H
#define FI_XPU_INCLUDED_OFI_OFI_PEER_H

#include <fi_xpu/ofi/ofi__post.h>

/* How long fi_xpu_flush waits for the proxy at most. */
#ifndef FI_XPU_OFI_FLUSH_TIMEOUT_MS
#define FI_XPU_OFI_FLUSH_TIMEOUT_MS 60000
#endif

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
	struct fi_xpu_ofi_wqe w;
	int own = fi_xpu_device_check_put_signal(flags, sig_addr, sig_op);
	if (!own && ((!buf && len) || !dest_addr))
		own = -FI_EINVAL;
	if (!ep)
		return -FI_EINVAL;
	w = fi_xpu_ofi_wqe_rma(FI_XPU_OFI_OP_PUT_SIGNAL, flags, dest_addr, buf, len, desc, addr, key,
			       context);
	w.atomic = (uint32_t)sig_op;
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

#endif /* FI_XPU_INCLUDED_OFI_OFI_PEER_H */
