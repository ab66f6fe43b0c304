/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Signal words: what put-with-signal updates at its target and what device
 * code waits on, shared by every provider's device code. An extension with
 * its own names (libfabric's <rdma/fi_xpu_device.h> has none of these);
 * the public calls are in fi_xpu/device.h, see fi_xpu_device(3).
 *
 * A signal word is an aligned uint64_t inside a registration. A
 * put-with-signal updates it at the target once its data is placed
 * (FI_XPU_SIGNAL_SET stores the value, FI_XPU_SIGNAL_ADD adds it); the
 * target's device code waits until the word compares to a value
 * (FI_XPU_CMP_*), reading it relaxed at system scope and fencing with
 * acquire order once it compares, so the data the signal covers is
 * visible once the wait returns 0. The wait needs
 * no counter and no transport support: it reads local memory.
 *
 * The abort word: every wait is given the address of its endpoint's
 * context's abort word (fi_xpu_ctx_abort(3); 0: none) and ends with
 * -FI_ECANCELED between two looks at the signal word once the host has
 * raised it (looked at every FI_XPU_ABORT_CHECK_NS, fi_xpu/device_handle.h), like every other device wait. fi_xpu_wait_aborted(ep)
 * (fi_xpu/device.h) asks the same of any endpoint.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_SIGNAL_H
#define FI_XPU_INCLUDED_DEVICE_SIGNAL_H

#include <fi_xpu/device_arch.h>
#include <fi_xpu/device_group.h>
#include <fi_xpu/device_handle.h>

/* How fi_xpu_put_signal updates the signal word. */
#define FI_XPU_SIGNAL_SET 0
#define FI_XPU_SIGNAL_ADD 1

/* Comparisons of fi_xpu_signal_wait_until: the word `op` the value. */
#define FI_XPU_CMP_EQ 0
#define FI_XPU_CMP_NE 1
#define FI_XPU_CMP_GT 2
#define FI_XPU_CMP_GE 3
#define FI_XPU_CMP_LT 4
#define FI_XPU_CMP_LE 5

/* Whether `word` `cmp` `value` holds (unsigned comparison). */
FI_XPU_FUNC int fi_xpu_signal_holds(uint64_t word, int cmp, uint64_t value)
{
	switch (cmp) {
	case FI_XPU_CMP_EQ:
		return word == value;
	case FI_XPU_CMP_NE:
		return word != value;
	case FI_XPU_CMP_GT:
		return word > value;
	case FI_XPU_CMP_GE:
		return word >= value;
	case FI_XPU_CMP_LT:
		return word < value;
	default:
		return word <= value;
	}
}

/* One work item's wait: 0 once the word compares, -FI_ETIMEDOUT after
 * `timeout_ms` (negative: no limit), -FI_ECANCELED once the abort word at
 * `abort` (0: none) is raised. Arguments are checked by the caller. */
FI_XPU_FUNC int fi_xpu_signal_wait_item(uint64_t abort, const uint64_t *sig, int cmp,
					uint64_t value, int timeout_ms)
{
	uint64_t start = fi_xpu_arch_clock_ns(), next = 0;

	/* Relaxed looks, then one acquire fence once the word compares: no
	 * cache invalidation on the turns that find nothing. */
	for (;;) {
		int rc;
		if (fi_xpu_signal_holds(
			    fi_xpu_arch_load_u64(sig, FI_XPU_ARCH_POLL, FI_XPU_ARCH_MS_SYSTEM), cmp,
			    value)) {
			fi_xpu_arch_fence(FI_XPU_ARCH_ACQUIRE, FI_XPU_ARCH_MS_SYSTEM);
			return 0;
		}
		rc = fi_xpu_i_wait_turn(abort, start, timeout_ms, &next);
		if (rc)
			return rc;
	}
}

/* The group's wait: every member passes the same word, comparison and
 * value; the leader waits and every member gets its status (the share is a
 * group barrier with acquire order, as in fi_xpu_coop_cntr_wait). */
FI_XPU_FUNC int fi_xpu_signal_wait(uint64_t abort, const uint64_t *sig, int cmp,
				   uint64_t value, int timeout_ms, int scope)
{
	struct fi_xpu_group g;
	int rc = fi_xpu_group_enter(&g, scope, "fi_xpu_signal_wait_until");

	if (rc)
		return rc;
	if (fi_xpu_group_leader(&g))
		rc = fi_xpu_signal_wait_item(abort, sig, cmp, value, timeout_ms);
	return (int)fi_xpu_group_share(&g, rc);
}

#endif /* FI_XPU_INCLUDED_DEVICE_SIGNAL_H */
