/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device architecture layer: the AMD backend (hipcc, clang HIP).
 * Part of <fi_xpu/device_arch.h>, which states what every function means
 * on every target; included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_ARCH_H
#include <fi_xpu/device_arch.h>
#endif
#ifndef FI_XPU_INCLUDED_ARCH_ARCH_AMDGCN_H
#define FI_XPU_INCLUDED_ARCH_ARCH_AMDGCN_H
#if defined(FI_XPU_ARCH_AMDGCN)

/*
 * clang's HIP atomic builtins carry the memory scope: "agent" is the whole
 * GPU, "" (system) reaches the host and peers. __HIP_MEMORY_SCOPE_* are
 * predefined by clang in HIP mode; fall back to their values otherwise.
 */
#ifndef __HIP_MEMORY_SCOPE_AGENT
#define __HIP_MEMORY_SCOPE_AGENT 4
#endif
#ifndef __HIP_MEMORY_SCOPE_SYSTEM
#define __HIP_MEMORY_SCOPE_SYSTEM 5
#endif
#define FI_XPU_I_ARCH_SCOPED(CALL, ...)                                        \
	do {                                                                  \
		if (mscope == FI_XPU_ARCH_MS_DEVICE) {                        \
			CALL(__VA_ARGS__, __HIP_MEMORY_SCOPE_AGENT)           \
		} else {                                                      \
			CALL(__VA_ARGS__, __HIP_MEMORY_SCOPE_SYSTEM)          \
		}                                                             \
	} while (0)
#define fi_xpu_i_arch_atomic_load(p, o, s) __hip_atomic_load(p, o, s)
#define fi_xpu_i_arch_atomic_store(p, v, o, s) __hip_atomic_store(p, v, o, s)
#define fi_xpu_i_arch_atomic_exchange(p, v, o, s) __hip_atomic_exchange(p, v, o, s)
#define fi_xpu_i_arch_atomic_fetch_add(p, v, o, s) __hip_atomic_fetch_add(p, v, o, s)
#define fi_xpu_i_arch_atomic_fetch_or(p, v, o, s) __hip_atomic_fetch_or(p, v, o, s)
#define fi_xpu_i_arch_atomic_fetch_and(p, v, o, s) __hip_atomic_fetch_and(p, v, o, s)
#define fi_xpu_i_arch_atomic_cas(p, e, d, o, f, s) \
	__hip_atomic_compare_exchange_strong(p, e, d, o, f, s)
#define FI_XPU_I_ARCH_HAVE_BUILTIN_ATOMICS 1

FI_XPU_FORCE_INLINE void fi_xpu_arch_fence(int order, int mscope)
{
#define FI_XPU_I_ARCH_F(O)                                                     \
	if (mscope == FI_XPU_ARCH_MS_DEVICE)                                  \
		__builtin_amdgcn_fence(O, "agent");                           \
	else                                                                  \
		__builtin_amdgcn_fence(O, "");
	switch (order) {
	case FI_XPU_ARCH_RELAXED: break;
	case FI_XPU_ARCH_ACQUIRE: FI_XPU_I_ARCH_F(__ATOMIC_ACQUIRE) break;
	case FI_XPU_ARCH_RELEASE: FI_XPU_I_ARCH_F(__ATOMIC_RELEASE) break;
	case FI_XPU_ARCH_ACQ_REL: FI_XPU_I_ARCH_F(__ATOMIC_ACQ_REL) break;
	default: FI_XPU_I_ARCH_F(__ATOMIC_SEQ_CST) break;
	}
#undef FI_XPU_I_ARCH_F
}

FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_lane_id(void)
{
	return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_subgroup_size(void)
{
#if defined(__has_builtin) && __has_builtin(__builtin_amdgcn_wavefrontsize)
	return (uint32_t)__builtin_amdgcn_wavefrontsize();
#else
	/* clang before 17 (ROCm 5's hipcc) has only the predefined macro. */
	return (uint32_t)__AMDGCN_WAVEFRONT_SIZE;
#endif
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_local_id(void)
{
	return __builtin_amdgcn_workitem_id_x() +
	       __builtin_amdgcn_workgroup_size_x() *
		       (__builtin_amdgcn_workitem_id_y() +
			__builtin_amdgcn_workgroup_size_y() * __builtin_amdgcn_workitem_id_z());
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_group_size(void)
{
	return (uint32_t)__builtin_amdgcn_workgroup_size_x() * __builtin_amdgcn_workgroup_size_y() *
	       __builtin_amdgcn_workgroup_size_z();
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_i_arch_ngroups(uint32_t grid, uint32_t wg)
{
	return (grid + wg - 1) / wg;
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_group_id(void)
{
	uint32_t nx = fi_xpu_i_arch_ngroups(__builtin_amdgcn_grid_size_x(), __builtin_amdgcn_workgroup_size_x());
	uint32_t ny = fi_xpu_i_arch_ngroups(__builtin_amdgcn_grid_size_y(), __builtin_amdgcn_workgroup_size_y());
	return __builtin_amdgcn_workgroup_id_x() +
	       nx * (__builtin_amdgcn_workgroup_id_y() + ny * __builtin_amdgcn_workgroup_id_z());
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_num_groups(void)
{
	return fi_xpu_i_arch_ngroups(__builtin_amdgcn_grid_size_x(), __builtin_amdgcn_workgroup_size_x()) *
	       fi_xpu_i_arch_ngroups(__builtin_amdgcn_grid_size_y(), __builtin_amdgcn_workgroup_size_y()) *
	       fi_xpu_i_arch_ngroups(__builtin_amdgcn_grid_size_z(), __builtin_amdgcn_workgroup_size_z());
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_subgroup_id(void)
{
	return fi_xpu_arch_local_id() / fi_xpu_arch_subgroup_size();
}
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_group_sync(void)
{
	__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
	__builtin_amdgcn_s_barrier();
	__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_subgroup_sync(void)
{
	__builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
	__builtin_amdgcn_wave_barrier();
	__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
/* The subgroup of a call is the lanes converged at it: the active lanes
 * (EXEC). Ranks count the members below; the leader is the first. */
#define FI_XPU_I_ARCH_SUBGROUP_CONVERGED 1
FI_XPU_FORCE_INLINE uint32_t fi_xpu_i_arch_subgroup_rank(void)
{
	uint64_t m = __builtin_amdgcn_read_exec();
	return __builtin_amdgcn_mbcnt_hi((uint32_t)(m >> 32),
					 __builtin_amdgcn_mbcnt_lo((uint32_t)m, 0u));
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_i_arch_subgroup_count(void)
{
	return (uint32_t)__builtin_popcountll(__builtin_amdgcn_read_exec());
}
FI_XPU_FORCE_INLINE uint64_t fi_xpu_i_arch_subgroup_bcast(uint64_t v)
{
	uint32_t lo = (uint32_t)__builtin_amdgcn_readfirstlane((int)(uint32_t)v);
	uint32_t hi = (uint32_t)__builtin_amdgcn_readfirstlane((int)(uint32_t)(v >> 32));
	return ((uint64_t)hi << 32) | lo;
}
FI_XPU_FORCE_INLINE void fi_xpu_arch_pause(void)
{
	__builtin_amdgcn_s_sleep(1);
}
/* The realtime counter runs at a constant 100 MHz on gfx9 and later. */
FI_XPU_FORCE_INLINE uint64_t fi_xpu_arch_clock_ns(void)
{
	return __builtin_amdgcn_s_memrealtime() * 10u;
}
/* Tells this launch's work group from any other: the dispatch packet and
 * the work group. */
FI_XPU_FORCE_INLINE uint64_t fi_xpu_i_arch_launch_id(void)
{
	return (uint64_t)(uintptr_t)__builtin_amdgcn_dispatch_ptr();
}
#define FI_XPU_I_ARCH_DEVICE_SCOPE_OK 0
#endif /* defined(FI_XPU_ARCH_AMDGCN) */

#endif /* FI_XPU_INCLUDED_ARCH_ARCH_AMDGCN_H */
