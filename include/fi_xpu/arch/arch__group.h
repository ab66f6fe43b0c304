/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device architecture layer: scopes (the set of work items that
 * call together: checks, ranks, barriers, broadcasts) and the checking
 * mode's bounded barrier.
 * Part of <fi_xpu/device_arch.h>, which states what every function means
 * on every target; included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_ARCH_H
#include <fi_xpu/device_arch.h>
#endif
#ifndef FI_XPU_INCLUDED_ARCH_ARCH_GROUP_H
#define FI_XPU_INCLUDED_ARCH_ARCH_GROUP_H

#if defined(FI_XPU_ARCH_NVPTX) || defined(FI_XPU_ARCH_AMDGCN)
/* Work-group broadcast on both GPU targets: the leader's value through one
 * word of group-shared memory, between two group barriers. */
FI_XPU_FORCE_INLINE uint64_t fi_xpu_i_arch_group_bcast(uint64_t v, uint32_t rank)
{
	static __attribute__((shared)) uint64_t fi_xpu_i_arch_slot;
	if (rank == 0)
		fi_xpu_i_arch_slot = v;
	fi_xpu_i_arch_group_sync();
	v = fi_xpu_i_arch_slot;
	fi_xpu_i_arch_group_sync();
	return v;
}
#endif

/* ---- scopes ------------------------------------------------------------ */

FI_XPU_FORCE_INLINE int fi_xpu_arch_scope_check(int scope)
{
	switch (scope) {
	case FI_XPU_WORK_ITEM:
	case FI_XPU_SUBGROUP:
	case FI_XPU_WORK_GROUP:
		return 0;
	case FI_XPU_DEVICE:
		return FI_XPU_I_ARCH_DEVICE_SCOPE_OK ? 0 : -FI_EOPNOTSUPP;
	default:
		return -FI_EINVAL;
	}
}

FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_scope_rank(int scope)
{
	switch (scope) {
	case FI_XPU_SUBGROUP:
#ifdef FI_XPU_I_ARCH_SUBGROUP_CONVERGED
		return fi_xpu_i_arch_subgroup_rank();
#else
		return fi_xpu_arch_lane_id();
#endif
	case FI_XPU_WORK_GROUP:
		return fi_xpu_arch_local_id();
	case FI_XPU_DEVICE:
		return fi_xpu_arch_group_id() * fi_xpu_arch_group_size() + fi_xpu_arch_local_id();
	default:
		return 0;
	}
}

FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_scope_size(int scope)
{
	switch (scope) {
	case FI_XPU_SUBGROUP: {
#ifdef FI_XPU_I_ARCH_SUBGROUP_CONVERGED
		return fi_xpu_i_arch_subgroup_count();
#else
		uint32_t sg = fi_xpu_arch_subgroup_size();
		uint32_t left = fi_xpu_arch_group_size() - fi_xpu_arch_subgroup_id() * sg;
		return left < sg ? left : sg;
#endif
	}
	case FI_XPU_WORK_GROUP:
		return fi_xpu_arch_group_size();
	case FI_XPU_DEVICE:
		return fi_xpu_arch_num_groups() * fi_xpu_arch_group_size();
	default:
		return 1;
	}
}


FI_XPU_FORCE_INLINE int fi_xpu_arch_barrier(int scope)
{
	int ret = fi_xpu_arch_scope_check(scope);
	if (ret)
		return ret;
	/* A work item is its own scope: nothing to meet or share. */
	if (scope == FI_XPU_WORK_ITEM)
		return 0;
#if defined(FI_XPU_ARCH_HOST)
	fi_xpu_i_arch_tsan_release();
	ret = fi_xpu_host_barrier(scope);
	fi_xpu_i_arch_tsan_acquire();
	return ret;
#else
	if (scope == FI_XPU_SUBGROUP)
		fi_xpu_i_arch_subgroup_sync();
	else if (scope == FI_XPU_WORK_GROUP)
		fi_xpu_i_arch_group_sync();
	return 0;
#endif
}

FI_XPU_FORCE_INLINE int fi_xpu_arch_broadcast_u64(int scope, uint64_t *value)
{
	int ret = fi_xpu_arch_scope_check(scope);
	if (ret)
		return ret;
	/* A work item is its own scope: nothing to meet or share. */
	if (scope == FI_XPU_WORK_ITEM)
		return 0;
#if defined(FI_XPU_ARCH_HOST)
	fi_xpu_i_arch_tsan_release();
	ret = fi_xpu_host_broadcast(scope, value);
	fi_xpu_i_arch_tsan_acquire();
	return ret;
#else
	if (scope == FI_XPU_SUBGROUP)
		*value = fi_xpu_i_arch_subgroup_bcast(*value);
	else if (scope == FI_XPU_WORK_GROUP)
		*value = fi_xpu_i_arch_group_bcast(*value, fi_xpu_arch_local_id());
	return 0;
#endif
}

/* ---- the checking mode's bounded barrier ------------------------------ */

/*
 * int fi_xpu_arch_barrier_timeout(int scope, uint64_t timeout_ns,
 *                                 uint32_t *arrived)
 *   fi_xpu_arch_barrier, except that a member that does not arrive within
 *   `timeout_ns` makes the others return -FI_ETIMEDOUT with the number of
 *   members that did in *arrived (the size of the scope instance on
 *   success). Used by FI_XPU_DEVICE_DEBUG (fi_xpu/device_group.h).
 *   Host: the launcher's barrier with a deadline. NVIDIA and AMD work
 *   groups: a counting barrier in one word of group-shared memory, waited
 *   on with the device clock; the word is claimed for this launch's work
 *   group by a tag (launch and work group ids) in its upper half, since
 *   group-shared memory starts undefined. Subgroups are the lanes
 *   converged at the call, all present by definition: a plain barrier. So
 *   is every scope under SPIR-V, which has no launch id to tag the word
 *   with.
 */
#if defined(FI_XPU_ARCH_NVPTX) || defined(FI_XPU_ARCH_AMDGCN)
FI_XPU_FORCE_INLINE uint64_t *fi_xpu_i_arch_debug_word(void)
{
	static __attribute__((shared)) uint64_t fi_xpu_i_arch_debug;
	return &fi_xpu_i_arch_debug;
}

FI_XPU_FUNC int fi_xpu_i_arch_group_barrier_timeout(uint64_t timeout_ns, uint32_t *arrived)
{
	uint64_t *w = fi_xpu_i_arch_debug_word();
	uint64_t id = fi_xpu_i_arch_launch_id() * 0x9e3779b97f4a7c15ULL + fi_xpu_arch_group_id();
	uint64_t tag = (id ^ (id >> 32)) << 32;
	uint32_t size = fi_xpu_arch_group_size(), ticket, target;
	uint64_t old = fi_xpu_arch_load_u64(w, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_DEVICE);
	uint64_t start;
	while ((old & ~0xffffffffULL) != tag) {
		uint64_t seen = fi_xpu_arch_cas_u64(w, old, tag, FI_XPU_ARCH_ACQ_REL,
						    FI_XPU_ARCH_MS_DEVICE);
		if (seen == old)
			break;
		old = seen;
	}
	/* Arrivals count up; those of one barrier share a run of `size`. */
	ticket = (uint32_t)fi_xpu_arch_fetch_add_u64(w, 1, FI_XPU_ARCH_ACQ_REL, FI_XPU_ARCH_MS_DEVICE);
	target = ticket - ticket % size + size;
	start = fi_xpu_arch_clock_ns();
	for (;;) {
		uint32_t now = (uint32_t)fi_xpu_arch_load_u64(w, FI_XPU_ARCH_ACQUIRE,
							      FI_XPU_ARCH_MS_DEVICE);
		if ((int32_t)(now - target) >= 0) {
			*arrived = size;
			return 0;
		}
		if (fi_xpu_arch_clock_ns() - start >= timeout_ns) {
			*arrived = now - (target - size);
			return -FI_ETIMEDOUT;
		}
		fi_xpu_arch_pause();
	}
}
#endif

FI_XPU_FUNC int fi_xpu_arch_barrier_timeout(int scope, uint64_t timeout_ns, uint32_t *arrived)
{
	int ret = fi_xpu_arch_scope_check(scope);
	*arrived = 1;
	if (ret || scope == FI_XPU_WORK_ITEM)
		return ret;
#if defined(FI_XPU_ARCH_HOST)
	fi_xpu_i_arch_tsan_release();
	ret = fi_xpu_host_barrier_timeout(scope, timeout_ns, arrived);
	fi_xpu_i_arch_tsan_acquire();
	return ret;
#elif defined(FI_XPU_ARCH_NVPTX) || defined(FI_XPU_ARCH_AMDGCN)
	if (scope == FI_XPU_WORK_GROUP)
		return fi_xpu_i_arch_group_barrier_timeout(timeout_ns, arrived);
	*arrived = fi_xpu_arch_scope_size(scope);
	return fi_xpu_arch_barrier(scope);
#else
	(void)timeout_ns;
	*arrived = fi_xpu_arch_scope_size(scope);
	return fi_xpu_arch_barrier(scope);
#endif
}

#endif /* FI_XPU_INCLUDED_ARCH_ARCH_GROUP_H */
