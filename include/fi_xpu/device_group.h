/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Scope groups: what a scope means to a device operation, shared by every
 * provider's device code.
 *
 * A scope (FI_XPU_WORK_ITEM, FI_XPU_SUBGROUP, FI_XPU_WORK_GROUP,
 * FI_XPU_DEVICE) names the set of work items that call an operation
 * together: the group. Every member issues its own operation with its own
 * arguments (a subgroup of sixteen lanes calling fi_xpu_send posts sixteen
 * sends); what the group buys is cost, not fewer operations: its leader
 * claims the slots of all members with one atomic and rings one doorbell
 * for all of them. Reading a CQ, waiting on a counter and flushing are the
 * exception: they have one shared destination, so the leader serves them
 * and the group gets the leader's result. All members pass the same
 * endpoint, CQ or counter handle.
 *
 * Members of a group:
 *   FI_XPU_WORK_ITEM   the caller alone
 *   FI_XPU_SUBGROUP    the lanes of the caller's subgroup (a trailing partial
 *                      subgroup has only the lanes it really has)
 *   FI_XPU_WORK_GROUP  the work items of the caller's work group
 *   FI_XPU_DEVICE      every work item of the launch (host XPU only; GPU
 *                      targets refuse it with -FI_EOPNOTSUPP)
 * A group call is collective, like __syncthreads(): every member reaches
 * it. Compiled with FI_XPU_DEVICE_DEBUG defined, every group call first
 * waits for its members for at most FI_XPU_DEVICE_DEBUG_TIMEOUT_MS
 * milliseconds (default 5000); when one never arrives, each member that did
 * reports the call, the scope and the group on stderr and returns
 * -FI_ETIMEDOUT instead of hanging (host XPU; on GPU targets the check is a
 * plain barrier).
 *
 *   int  fi_xpu_group_enter(struct fi_xpu_group *g, int scope, const char *call)
 *        Checks the scope (-FI_EINVAL, -FI_EOPNOTSUPP: see
 *        fi_xpu_arch_scope_check) and fills in the caller's rank and the
 *        group's size. `call` names the operation for the checking mode.
 *   int  fi_xpu_group_leader(const struct fi_xpu_group *g)   rank 0
 *   uint64_t fi_xpu_group_bcast(const struct fi_xpu_group *g, uint64_t v)
 *        The leader's `v` for every member.
 *   int64_t fi_xpu_group_share(const struct fi_xpu_group *g, int64_t r)
 *        The leader's result for every member (calls the leader serves).
 *   void fi_xpu_group_sync(const struct fi_xpu_group *g)     a group barrier
 *   int  fi_xpu_group_leave(const struct fi_xpu_group *g, int own)
 *        Waits until every member's operation was issued and returns the
 *        caller's own status.
 */
#ifndef FI_XPU_DEVICE_GROUP_H
#define FI_XPU_DEVICE_GROUP_H

#include <fi_xpu/device_arch.h>

#if defined(FI_XPU_DEVICE_DEBUG) && defined(FI_XPU_ARCH_HOST)
#include <stdio.h>
#endif

#ifndef FI_XPU_DEVICE_DEBUG_TIMEOUT_MS
#define FI_XPU_DEVICE_DEBUG_TIMEOUT_MS 5000
#endif

struct fi_xpu_group {
	int scope;
	uint32_t rank; /* the caller's place in the group, 0 = leader */
	uint32_t size; /* members */
};

#if defined(FI_XPU_DEVICE_DEBUG) && defined(FI_XPU_ARCH_HOST)
FI_XPU_FUNC const char *fi_xpu_group_scope_name(int scope)
{
	switch (scope) {
	case FI_XPU_SUBGROUP:
		return "FI_XPU_SUBGROUP";
	case FI_XPU_WORK_GROUP:
		return "FI_XPU_WORK_GROUP";
	case FI_XPU_DEVICE:
		return "FI_XPU_DEVICE";
	default:
		return "FI_XPU_WORK_ITEM";
	}
}

FI_XPU_FUNC void fi_xpu_group_report(const struct fi_xpu_group *g, const char *call,
				     uint32_t arrived)
{
	fprintf(stderr,
		"fi_xpu: FI_XPU_DEVICE_DEBUG: %s at %s scope: only %u of the %u members of the "
		"group (work group %u, subgroup %u) reached the call within %d ms; this is work "
		"item %u (rank %u); returning -FI_ETIMEDOUT\n",
		call, fi_xpu_group_scope_name(g->scope), (unsigned)arrived, (unsigned)g->size,
		(unsigned)fi_xpu_arch_group_id(), (unsigned)fi_xpu_arch_subgroup_id(),
		(int)FI_XPU_DEVICE_DEBUG_TIMEOUT_MS, (unsigned)fi_xpu_arch_local_id(),
		(unsigned)g->rank);
}
#endif

/* The checking mode's bounded wait for every member (see above). */
FI_XPU_FUNC int fi_xpu_group_check(const struct fi_xpu_group *g, const char *call)
{
#if defined(FI_XPU_DEVICE_DEBUG) && defined(FI_XPU_ARCH_HOST)
	uint32_t arrived = 0;
	int rc = fi_xpu_host_barrier_timeout(
		g->scope, (uint64_t)FI_XPU_DEVICE_DEBUG_TIMEOUT_MS * 1000000ULL, &arrived);
	if (rc == -FI_ETIMEDOUT)
		fi_xpu_group_report(g, call, arrived);
	return rc;
#elif defined(FI_XPU_DEVICE_DEBUG)
	(void)call;
	return fi_xpu_arch_barrier(g->scope);
#else
	(void)g;
	(void)call;
	return 0;
#endif
}

FI_XPU_FUNC int fi_xpu_group_enter(struct fi_xpu_group *g, int scope, const char *call)
{
	int rc = fi_xpu_arch_scope_check(scope);

	g->scope = scope;
	g->rank = 0;
	g->size = 1;
	if (rc || scope == FI_XPU_WORK_ITEM)
		return rc;
	g->rank = fi_xpu_arch_scope_rank(scope);
	g->size = fi_xpu_arch_scope_size(scope);
	return fi_xpu_group_check(g, call);
}

FI_XPU_FUNC int fi_xpu_group_leader(const struct fi_xpu_group *g)
{
	return g->rank == 0;
}

FI_XPU_FUNC uint64_t fi_xpu_group_bcast(const struct fi_xpu_group *g, uint64_t v)
{
	if (g->scope != FI_XPU_WORK_ITEM)
		(void)fi_xpu_arch_broadcast_u64(g->scope, &v);
	return v;
}

FI_XPU_FUNC int64_t fi_xpu_group_share(const struct fi_xpu_group *g, int64_t r)
{
	return (int64_t)fi_xpu_group_bcast(g, (uint64_t)r);
}

FI_XPU_FUNC void fi_xpu_group_sync(const struct fi_xpu_group *g)
{
	if (g->scope != FI_XPU_WORK_ITEM)
		(void)fi_xpu_arch_barrier(g->scope);
}

FI_XPU_FUNC int fi_xpu_group_leave(const struct fi_xpu_group *g, int own)
{
	fi_xpu_group_sync(g);
	return own;
}

#endif /* FI_XPU_DEVICE_GROUP_H */
