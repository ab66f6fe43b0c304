/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: RMA writes and reads.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_RMA_H
#define FI_XPU_INCLUDED_SHM_SHM_RMA_H

#include <fi_xpu/shm/shm__peer.h>

/* ---- RMA ---------------------------------------------------------------- */
FI_XPU_FUNC int fi_xpu_shm_rma(const struct fid_xpu_ep *hep, int is_write, void *buf, size_t len,
			       const void *dest_addr, uint64_t addr, uint64_t key, uint64_t data,
			       uint64_t flags, void *context, int scope)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	unsigned char *mem = FI_XPU_I_NULL;
	int64_t rc = 0;
	int err = 0;
	uint64_t cflags = (is_write ? FI_WRITE : FI_READ) | FI_RMA;
	FI_XPU_GROUP_ENTER_RANK(scope, rank);
	if (!ep || (!buf && len))
		return -FI_EINVAL;
	/* FI_COMPLETION with no CQ bound for transmit: the completion would go
	 * nowhere, and whoever waits for it would wait forever. */
	if ((flags & FI_COMPLETION) && !ep->tx_cq)
		return -FI_ENOCQ;
	if (rank == 0) {
		/* A bad address is the caller's error, returned as such. */
		rc = fi_xpu_shm_resolve(ep, dest_addr, addr, len, key,
					is_write ? FI_REMOTE_WRITE : FI_REMOTE_READ, &t, &mem);
		if (rc == 0 && is_write && (flags & FI_REMOTE_CQ_DATA) &&
		    fi_xpu_shm_ldr(&t.info->rx_cq) == 0)
			rc = -FI_EOPNOTSUPP;
		/* A refused access is reported as an error completion (below). */
		if (t.info && (rc == -FI_EACCES || rc == -FI_EINVAL || rc == -FI_EOPNOTSUPP)) {
			err = (int)rc;
			rc = 1;
		}
	}
	/* Success goes out as 2 + the target's scope, so that one broadcast
	 * gives the members both. */
	rc = fi_xpu_group_scope_bcast(scope, rc ? rc : 2 + t.ms);
	if (rc < 1)
		return (int)rc;
	if (rc >= 2) {
		t.ms = (int)(rc - 2);
		mem = (unsigned char *)(uintptr_t)fi_xpu_group_scope_bcast(scope, (int64_t)(uintptr_t)mem);
		/* A write's data, then (the fence at the peer's scope) what
		 * announces it: the remote completion and counter, our own
		 * completion. */
		if (is_write)
			fi_xpu_coop_copy(mem, buf, len, scope, t.ms);
		else
			fi_xpu_coop_copy(buf, mem, len, scope, t.ms);
		fi_xpu_arch_fence(FI_XPU_ARCH_SEQ_CST, t.ms);
	}
	if (rank == 0 && rc >= 2) {
		if (is_write && (flags & FI_REMOTE_CQ_DATA)) {
			struct fi_xpu_shm_cqe_in in = fi_xpu_shm_cqe_zero();
			in.flags = FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA;
			/* len and buf stay 0, as on every provider: libfabric
			 * defines them for receives only and its transports
			 * disagree (tcp reports 0). */
			in.data = data;
			in.src_nonce = ep->nonce;
			in.src_ep = ep->ep_id;
			(void)fi_xpu_shm_tcq_push(&t, &in);
		}
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_shm_add(fi_xpu_shm_tcntr(&t, is_write ? &t.info->rem_write_cntr
							   : &t.info->rem_read_cntr),
			       1));
	}
	/* Our own completion, or a refusal's error completion: one place. */
	if (rank == 0)
		fi_xpu_shm_complete(ep, is_write ? FI_XPU_SHM_CNTR_WRITE : FI_XPU_SHM_CNTR_READ,
				    cflags, context, len, err);
	if (rc >= 2)
		fi_xpu_group_scope_sync(scope);
	return 0;
}

#endif /* FI_XPU_INCLUDED_SHM_SHM_RMA_H */
