/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: put with signal, fence, quiet, direct
 * pointers to peer memory.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_SIGNAL_H
#define FI_XPU_INCLUDED_SHM_SHM_SIGNAL_H

#include <fi_xpu/shm/shm__cq.h>

/* ---- put with signal, fence, quiet, direct pointers ------------------- */
/* Copies the data of a put-with-signal: the copy of fi_xpu_coop_copy for
 * a group of one (16-byte units, four in flight, on GPUs; memcpy on CPU
 * threads). Under the testing-only delay it places the data as a slow,
 * reordering transport would: 64-byte pieces, the last one first,
 * `delay_ns` apart, so that a signal raised before the copy ended is seen
 * with data missing. */
FI_XPU_FUNC void fi_xpu_shm_place(unsigned char *dst, const unsigned char *src, size_t len,
				  uint64_t delay_ns)
{
	size_t n;
	if (!delay_ns) {
		fi_xpu_i_coop_copy_share(dst, src, len, 0, 1);
		return;
	}
	for (n = (len + 63) / 64; n-- > 0;) {
		size_t lo = n * 64, hi = lo + 64 < len ? lo + 64 : len;
		uint64_t t0 = fi_xpu_arch_clock_ns();
		while (fi_xpu_arch_clock_ns() - t0 < delay_ns)
			fi_xpu_arch_pause();
		fi_xpu_shm_copy(dst + lo, src + lo, hi - lo);
	}
}

/* Where a put-with-signal goes: the data's registration and the signal
 * word's, each through the resolve table (fi_xpu_shm_resolve), into *t,
 * *mem and *sig; 0 or the refusal's code. */
FI_XPU_FUNC int fi_xpu_shm_put_signal_resolve(struct fi_xpu_shm_ep_dev *ep, const void *dest_addr,
					      uint64_t addr, size_t len, uint64_t key,
					      uint64_t sig_addr, uint64_t sig_key,
					      struct fi_xpu_shm_target *t, unsigned char **mem,
					      unsigned char **sig)
{
	int rc = fi_xpu_shm_resolve(ep, dest_addr, addr, len, key, FI_REMOTE_WRITE, t, mem);
	if (rc == 0)
		rc = fi_xpu_shm_resolve(ep, dest_addr, sig_addr, 8, sig_key, FI_REMOTE_WRITE, t, sig);
	if (rc == 0 && ((uintptr_t)*sig & 7) != 0)
		rc = -FI_EINVAL;
	return rc;
}

/* Once the data is placed: a fence at the peer's scope
 * (fi_xpu_shm_peer_addr.scope), then the signal word, so that a peer that
 * sees the signal sees the data; then the peer's remote-write counter and
 * our completion. */
#ifndef FI_XPU_I_TEST_SIG_ORDER /* testing only: tests/weak_order.rs weakens it */
#define FI_XPU_I_TEST_SIG_ORDER(order, mscope) order, mscope
#endif
FI_XPU_FUNC void fi_xpu_shm_signal_raise(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_target t,
					 unsigned char *sig, uint64_t signal, int sig_op,
					 void *context, size_t len)
{
	fi_xpu_arch_fence(FI_XPU_I_TEST_SIG_ORDER(FI_XPU_ARCH_SEQ_CST, t.ms));
	if (sig_op == FI_XPU_SIGNAL_SET)
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_SIGNAL,
				 fi_xpu_arch_store_u64((uint64_t *)(void *)sig, signal,
						       FI_XPU_I_TEST_SIG_ORDER(FI_XPU_ARCH_RELEASE, t.ms)));
	else
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_SIGNAL,
				 (void)fi_xpu_arch_fetch_add_u64((uint64_t *)(void *)sig, signal,
								 FI_XPU_ARCH_ACQ_REL, t.ms));
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_shm_add(fi_xpu_shm_tcntr(&t, &t.info->rem_write_cntr), 1));
	fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_WRITE, FI_WRITE | FI_RMA, context, len, 0);
}

/* One work item's put-with-signal: the data, then the signal
 * (fi_xpu_shm_signal_raise). Checked like a write; a refused access (data
 * or signal word) is an error completion and touches nothing. */
FI_XPU_FUNC int fi_xpu_shm_put_signal_item(struct fid_xpu_ep *hep, const void *buf, size_t len,
					   const void *dest_addr, uint64_t addr, uint64_t key,
					   uint64_t sig_addr, uint64_t sig_key, uint64_t signal,
					   int sig_op, void *context)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	unsigned char *mem = FI_XPU_I_NULL, *sig = FI_XPU_I_NULL;
	int rc;
	if (!ep || (!buf && len) || !dest_addr)
		return -FI_EINVAL;
	rc = fi_xpu_shm_put_signal_resolve(ep, dest_addr, addr, len, key, sig_addr, sig_key, &t,
					   &mem, &sig);
	if (t.info && (rc == -FI_EACCES || rc == -FI_EINVAL)) {
		fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_WRITE, FI_WRITE | FI_RMA, context, len, rc);
		return 0;
	}
	if (rc)
		return rc;
	fi_xpu_shm_place(mem, (const unsigned char *)buf, len, ep->test_delay_ns);
	fi_xpu_shm_signal_raise(ep, t, sig, signal, sig_op, context, len);
	return 0;
}

/* The group's one put-with-signal (fi_xpu_coop_put_signal): the leader
 * resolves, the members share the copy (fi_xpu_coop_copy, which ends with
 * every member's release at the peer's scope and a group barrier), then
 * the leader raises the signal. Under the testing-only delay the leader
 * places the data alone, as fi_xpu_shm_place does for a work item. Every
 * member gets the same status. */
FI_XPU_FUNC int fi_xpu_shm_put_signal_group(struct fid_xpu_ep *hep, const void *buf, size_t len,
					    const void *dest_addr, uint64_t addr, uint64_t key,
					    uint64_t sig_addr, uint64_t sig_key, uint64_t signal,
					    int sig_op, void *context, int scope)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	unsigned char *mem = FI_XPU_I_NULL, *sig = FI_XPU_I_NULL;
	int64_t rc = 0;
	FI_XPU_GROUP_ENTER_RANK(scope, rank);
	if (!ep || (!buf && len) || !dest_addr)
		return -FI_EINVAL;
	if (rank == 0) {
		rc = fi_xpu_shm_put_signal_resolve(ep, dest_addr, addr, len, key, sig_addr,
						   sig_key, &t, &mem, &sig);
		/* A refused access: the error completion, and 0 for all. */
		if (t.info && (rc == -FI_EACCES || rc == -FI_EINVAL)) {
			fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_WRITE, FI_WRITE | FI_RMA, context,
					    len, (int)rc);
			rc = 1;
		}
	}
	/* Success goes out as 2 + the peer's scope (as in fi_xpu_shm_rma). */
	rc = fi_xpu_group_scope_bcast(scope, rc ? rc : 2 + t.ms);
	if (rc < 2)
		return rc < 0 ? (int)rc : 0;
	mem = (unsigned char *)(uintptr_t)fi_xpu_group_scope_bcast(scope, (int64_t)(uintptr_t)mem);
	if (ep->test_delay_ns && rank == 0)
		fi_xpu_shm_place(mem, (const unsigned char *)buf, len, ep->test_delay_ns);
	fi_xpu_coop_copy(mem, buf, ep->test_delay_ns ? 0 : len, scope, (int)(rc - 2));
	if (rank == 0)
		fi_xpu_shm_signal_raise(ep, t, sig, signal, sig_op, context, len);
	fi_xpu_group_scope_sync(scope);
	return 0;
}

/* Where `len` bytes at `addr` of the peer's registration `key` are mapped
 * here, or NULL: an unknown or departed peer, a key that does not cover
 * them or lacks remote read and write access. */
FI_XPU_FUNC void *fi_xpu_shm_peer_ptr_item(struct fid_xpu_ep *hep, const void *dest_addr,
					   uint64_t addr, uint64_t key, size_t len)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	unsigned char *mem = FI_XPU_I_NULL;
	if (!ep || fi_xpu_shm_target_of(ep, dest_addr, &t) != 0 ||
	    fi_xpu_shm_rkey(&t, addr, len, key, FI_REMOTE_READ | FI_REMOTE_WRITE, &mem) != 0)
		return FI_XPU_I_NULL;
	return mem;
}

#endif /* FI_XPU_INCLUDED_SHM_SHM_SIGNAL_H */
