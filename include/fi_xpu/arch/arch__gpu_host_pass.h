/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device architecture layer: the host pass of a CUDA or HIP
 * translation unit, where device functions are parsed but never run.
 * Part of <fi_xpu/device_arch.h>, which states what every function means
 * on every target; included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_ARCH_H
#include <fi_xpu/device_arch.h>
#endif
#ifndef FI_XPU_INCLUDED_ARCH_ARCH_GPU_HOST_PASS_H
#define FI_XPU_INCLUDED_ARCH_ARCH_GPU_HOST_PASS_H
#if defined(FI_XPU_ARCH_GPU_HOST_PASS)

#define fi_xpu_i_arch_atomic_load(p, o, s) __atomic_load_n(p, o)
#define fi_xpu_i_arch_atomic_store(p, v, o, s) __atomic_store_n(p, v, o)
#define fi_xpu_i_arch_atomic_exchange(p, v, o, s) __atomic_exchange_n(p, v, o)
#define fi_xpu_i_arch_atomic_fetch_add(p, v, o, s) __atomic_fetch_add(p, v, o)
#define fi_xpu_i_arch_atomic_fetch_or(p, v, o, s) __atomic_fetch_or(p, v, o)
#define fi_xpu_i_arch_atomic_fetch_and(p, v, o, s) __atomic_fetch_and(p, v, o)
#define fi_xpu_i_arch_atomic_cas(p, e, d, o, f, s) __atomic_compare_exchange_n(p, e, d, 0, o, f)
#define FI_XPU_I_ARCH_HAVE_BUILTIN_ATOMICS 1
#define FI_XPU_I_ARCH_SCOPED(CALL, ...)                                        \
	do {                                                                  \
		(void)mscope;                                                 \
		CALL(__VA_ARGS__, 0)                                          \
	} while (0)
FI_XPU_FORCE_INLINE void fi_xpu_arch_fence(int order, int mscope)
{
	(void)order, (void)mscope;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_lane_id(void) { return 0; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_subgroup_size(void) { return 1; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_subgroup_id(void) { return 0; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_local_id(void) { return 0; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_group_size(void) { return 1; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_group_id(void) { return 0; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_num_groups(void) { return 1; }
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_group_sync(void) {}
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_subgroup_sync(void) {}
FI_XPU_FORCE_INLINE uint64_t fi_xpu_i_arch_subgroup_bcast(uint64_t v) { return v; }
FI_XPU_FORCE_INLINE uint64_t fi_xpu_i_arch_group_bcast(uint64_t v, uint32_t rank)
{
	(void)rank;
	return v;
}
FI_XPU_FORCE_INLINE void fi_xpu_arch_pause(void) {}
FI_XPU_FORCE_INLINE uint64_t fi_xpu_arch_clock_ns(void) { return 0; }
#define FI_XPU_I_ARCH_DEVICE_SCOPE_OK 0
#endif /* defined(FI_XPU_ARCH_GPU_HOST_PASS) */

#endif /* FI_XPU_INCLUDED_ARCH_ARCH_GPU_HOST_PASS_H */
