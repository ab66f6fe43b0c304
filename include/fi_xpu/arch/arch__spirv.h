/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device architecture layer: the SYCL device backend (SPIR-V).
 * Part of <fi_xpu/device_arch.h>, which states what every function means
 * on every target; included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_ARCH_H
#include <fi_xpu/device_arch.h>
#endif
#ifndef FI_XPU_INCLUDED_ARCH_ARCH_SPIRV_H
#define FI_XPU_INCLUDED_ARCH_ARCH_SPIRV_H
#if defined(FI_XPU_ARCH_SPIRV)

/*
 * SYCL device compilation without SDK headers: the SPIR-V builtins are
 * declared here with the names and signatures the SPIR-V translator
 * recognises. Atomics use clang's scoped atomic builtins.
 */
#define FI_XPU_I_ARCH_SPV_CROSS_DEVICE 0
#define FI_XPU_I_ARCH_SPV_DEVICE 1
#define FI_XPU_I_ARCH_SPV_WORKGROUP 2
#define FI_XPU_I_ARCH_SPV_SUBGROUP 3
/* Sequentially consistent, on work-group and cross-work-group memory. */
#define FI_XPU_I_ARCH_SPV_SEM (0x10 | 0x100 | 0x200)

extern size_t __spirv_BuiltInLocalInvocationId(int);
extern size_t __spirv_BuiltInWorkgroupSize(int);
extern size_t __spirv_BuiltInWorkgroupId(int);
extern size_t __spirv_BuiltInNumWorkgroups(int);
extern uint32_t __spirv_BuiltInSubgroupLocalInvocationId(void);
extern uint32_t __spirv_BuiltInSubgroupMaxSize(void);
extern uint32_t __spirv_BuiltInSubgroupId(void);
extern void __spirv_ControlBarrier(int, int, int);
extern void __spirv_MemoryBarrier(int, int);
extern uint64_t __spirv_GroupBroadcast(int, uint64_t, uint32_t);
extern uint64_t __spirv_ReadClockKHR(int);

/* Overloads for the integer widths used here; the SPIR-V translator maps
 * them by name, so they coexist with the SYCL headers' own declarations. */
#define FI_XPU_I_ARCH_SPV_DECL(T)                                                   \
	extern T __spirv_AtomicLoad(const T *, int, int);                          \
	extern void __spirv_AtomicStore(T *, int, int, T);                         \
	extern T __spirv_AtomicExchange(T *, int, int, T);                         \
	extern T __spirv_AtomicIAdd(T *, int, int, T);                             \
	extern T __spirv_AtomicOr(T *, int, int, T);                               \
	extern T __spirv_AtomicAnd(T *, int, int, T);                              \
	extern T __spirv_AtomicCompareExchange(T *, int, int, int, T, T);
FI_XPU_I_ARCH_SPV_DECL(uint32_t)
FI_XPU_I_ARCH_SPV_DECL(uint64_t)

FI_XPU_FORCE_INLINE int fi_xpu_i_arch_spv_sem(int order)
{
	switch (order) {
	case FI_XPU_ARCH_RELAXED: return 0;
	case FI_XPU_ARCH_ACQUIRE: return 0x2 | 0x100 | 0x200;
	case FI_XPU_ARCH_RELEASE: return 0x4 | 0x100 | 0x200;
	case FI_XPU_ARCH_ACQ_REL: return 0x8 | 0x100 | 0x200;
	default: return 0x10 | 0x100 | 0x200;
	}
}
#define FI_XPU_I_ARCH_SPV_SCOPE(ms) \
	((ms) == FI_XPU_ARCH_MS_DEVICE ? FI_XPU_I_ARCH_SPV_DEVICE : FI_XPU_I_ARCH_SPV_CROSS_DEVICE)
#define FI_XPU_I_ARCH_SPV_RMW(BITS, NAME, OP)                                            \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_arch_##NAME##_u##BITS(                \
		uint##BITS##_t *p, uint##BITS##_t v, int order, int mscope)             \
	{                                                                               \
		return __spirv_Atomic##OP(p, FI_XPU_I_ARCH_SPV_SCOPE(mscope),            \
					  fi_xpu_i_arch_spv_sem(order), v);              \
	}
#define FI_XPU_I_ARCH_SPV_DEF(BITS)                                                      \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_arch_load_u##BITS(                    \
		const uint##BITS##_t *p, int order, int mscope)                         \
	{                                                                               \
		return __spirv_AtomicLoad(p, FI_XPU_I_ARCH_SPV_SCOPE(mscope),            \
					  fi_xpu_i_arch_spv_sem(order));                 \
	}                                                                               \
	FI_XPU_FORCE_INLINE void fi_xpu_arch_store_u##BITS(                             \
		uint##BITS##_t *p, uint##BITS##_t v, int order, int mscope)             \
	{                                                                               \
		__spirv_AtomicStore(p, FI_XPU_I_ARCH_SPV_SCOPE(mscope),                  \
				    fi_xpu_i_arch_spv_sem(order), v);                    \
	}                                                                               \
	FI_XPU_I_ARCH_SPV_RMW(BITS, exchange, Exchange)                                  \
	FI_XPU_I_ARCH_SPV_RMW(BITS, fetch_add, IAdd)                                     \
	FI_XPU_I_ARCH_SPV_RMW(BITS, fetch_or, Or)                                        \
	FI_XPU_I_ARCH_SPV_RMW(BITS, fetch_and, And)                                      \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_arch_cas_u##BITS(                     \
		uint##BITS##_t *p, uint##BITS##_t e, uint##BITS##_t d, int order,       \
		int mscope)                                                             \
	{                                                                               \
		int sem = fi_xpu_i_arch_spv_sem(order);                                  \
		/* The failure order may not be a release one. */                       \
		int fail = (sem & 0x1e) == 0x4 ? 0 : (sem & 0x1e) == 0x8 ? (0x2 | 0x300) : sem; \
		return __spirv_AtomicCompareExchange(p, FI_XPU_I_ARCH_SPV_SCOPE(mscope), sem,  \
						     fail, d, e);                       \
	}
FI_XPU_I_ARCH_SPV_DEF(32)
FI_XPU_I_ARCH_SPV_DEF(64)

FI_XPU_FORCE_INLINE void fi_xpu_arch_fence(int order, int mscope)
{
	/* Memory semantics: the order bit, on work-group and cross-work-group
	 * (global) memory. */
	int sem;
	switch (order) {
	case FI_XPU_ARCH_RELAXED: return;
	case FI_XPU_ARCH_ACQUIRE: sem = 0x2; break;
	case FI_XPU_ARCH_RELEASE: sem = 0x4; break;
	case FI_XPU_ARCH_ACQ_REL: sem = 0x8; break;
	default: sem = 0x10; break;
	}
	__spirv_MemoryBarrier(mscope == FI_XPU_ARCH_MS_DEVICE ? FI_XPU_I_ARCH_SPV_DEVICE
							     : FI_XPU_I_ARCH_SPV_CROSS_DEVICE,
			      sem | 0x100 | 0x200);
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_lane_id(void)
{
	return __spirv_BuiltInSubgroupLocalInvocationId();
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_subgroup_size(void)
{
	return __spirv_BuiltInSubgroupMaxSize();
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_subgroup_id(void)
{
	return __spirv_BuiltInSubgroupId();
}
/* SYCL linearises ids with dimension 0 slowest-varying... but SPIR-V
 * numbers them x fastest, as below; either way the result is a bijection,
 * which is all the cooperative code needs. */
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_local_id(void)
{
	return (uint32_t)(__spirv_BuiltInLocalInvocationId(0) +
			  __spirv_BuiltInWorkgroupSize(0) *
				  (__spirv_BuiltInLocalInvocationId(1) +
				   __spirv_BuiltInWorkgroupSize(1) * __spirv_BuiltInLocalInvocationId(2)));
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_group_size(void)
{
	return (uint32_t)(__spirv_BuiltInWorkgroupSize(0) * __spirv_BuiltInWorkgroupSize(1) *
			  __spirv_BuiltInWorkgroupSize(2));
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_group_id(void)
{
	return (uint32_t)(__spirv_BuiltInWorkgroupId(0) +
			  __spirv_BuiltInNumWorkgroups(0) *
				  (__spirv_BuiltInWorkgroupId(1) +
				   __spirv_BuiltInNumWorkgroups(1) * __spirv_BuiltInWorkgroupId(2)));
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_num_groups(void)
{
	return (uint32_t)(__spirv_BuiltInNumWorkgroups(0) * __spirv_BuiltInNumWorkgroups(1) *
			  __spirv_BuiltInNumWorkgroups(2));
}
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_group_sync(void)
{
	__spirv_ControlBarrier(FI_XPU_I_ARCH_SPV_WORKGROUP, FI_XPU_I_ARCH_SPV_WORKGROUP,
			       FI_XPU_I_ARCH_SPV_SEM);
}
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_subgroup_sync(void)
{
	__spirv_ControlBarrier(FI_XPU_I_ARCH_SPV_SUBGROUP, FI_XPU_I_ARCH_SPV_SUBGROUP,
			       FI_XPU_I_ARCH_SPV_SEM);
}
FI_XPU_FORCE_INLINE uint64_t fi_xpu_i_arch_subgroup_bcast(uint64_t v)
{
	return __spirv_GroupBroadcast(FI_XPU_I_ARCH_SPV_SUBGROUP, v, 0);
}
FI_XPU_FORCE_INLINE uint64_t fi_xpu_i_arch_group_bcast(uint64_t v, uint32_t rank)
{
	(void)rank;
	return __spirv_GroupBroadcast(FI_XPU_I_ARCH_SPV_WORKGROUP, v, 0);
}
FI_XPU_FORCE_INLINE void fi_xpu_arch_pause(void)
{
}
FI_XPU_FORCE_INLINE uint64_t fi_xpu_arch_clock_ns(void)
{
	return __spirv_ReadClockKHR(FI_XPU_I_ARCH_SPV_DEVICE);
}
#define FI_XPU_I_ARCH_DEVICE_SCOPE_OK 0
#endif /* defined(FI_XPU_ARCH_SPIRV) */

#endif /* FI_XPU_INCLUDED_ARCH_ARCH_SPIRV_H */
