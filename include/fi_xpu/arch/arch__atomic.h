/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device architecture layer: the scoped atomics of the targets built
 * on compiler builtins (AMD, the host, the host pass).
 * Part of <fi_xpu/device_arch.h>, which states what every function means
 * on every target; included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_ARCH_H
#include <fi_xpu/device_arch.h>
#endif
#ifndef FI_XPU_INCLUDED_ARCH_ARCH_ATOMIC_H
#define FI_XPU_INCLUDED_ARCH_ARCH_ATOMIC_H

/* ---- atomics of the builtin-based targets ------------------------------ */
#if defined(FI_XPU_I_ARCH_HAVE_BUILTIN_ATOMICS)
/* FI_XPU_I_ARCH_SCOPED(CALL, ...) expands CALL(..., S) with S the constant
 * memory-scope argument matching `mscope`. */
#define FI_XPU_I_ARCH_LOAD_CALL(O, S) return fi_xpu_i_arch_atomic_load(p, O, S);
#define FI_XPU_I_ARCH_STORE_CALL(O, S)                                         \
	fi_xpu_i_arch_atomic_store(p, v, O, S);                                \
	return;
#define FI_XPU_I_ARCH_CAS_CALL(O, F, S)                                        \
	(void)fi_xpu_i_arch_atomic_cas(p, &e, d, O, F, S);                     \
	return e;
#define FI_XPU_I_ARCH_RMW_CALL(NAME, O, S) return fi_xpu_i_arch_atomic_##NAME(p, v, O, S);

#define FI_XPU_I_ARCH_RMW_DEF(BITS, NAME)                                              \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_arch_##NAME##_u##BITS(              \
		uint##BITS##_t *p, uint##BITS##_t v, int order, int mscope)           \
	{                                                                             \
		switch (order) {                                                      \
		case FI_XPU_ARCH_RELAXED:                                             \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_RMW_CALL, NAME, __ATOMIC_RELAXED); \
		case FI_XPU_ARCH_ACQUIRE:                                             \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_RMW_CALL, NAME, __ATOMIC_ACQUIRE); \
		case FI_XPU_ARCH_RELEASE:                                             \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_RMW_CALL, NAME, __ATOMIC_RELEASE); \
		case FI_XPU_ARCH_ACQ_REL:                                             \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_RMW_CALL, NAME, __ATOMIC_ACQ_REL); \
		default:                                                              \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_RMW_CALL, NAME, __ATOMIC_SEQ_CST); \
		}                                                                     \
		return 0;                                                             \
	}

#define FI_XPU_I_ARCH_DEF(BITS)                                                        \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_arch_load_u##BITS(                  \
		const uint##BITS##_t *p, int order, int mscope)                       \
	{                                                                             \
		if (order == FI_XPU_ARCH_RELAXED)                                     \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_LOAD_CALL, __ATOMIC_RELAXED); \
		if (order == FI_XPU_ARCH_ACQUIRE)                                     \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_LOAD_CALL, __ATOMIC_ACQUIRE); \
		FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_LOAD_CALL, __ATOMIC_SEQ_CST);        \
		return 0;                                                             \
	}                                                                             \
	FI_XPU_FORCE_INLINE void fi_xpu_arch_store_u##BITS(                           \
		uint##BITS##_t *p, uint##BITS##_t v, int order, int mscope)           \
	{                                                                             \
		if (order == FI_XPU_ARCH_RELAXED)                                     \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_STORE_CALL, __ATOMIC_RELAXED); \
		if (order == FI_XPU_ARCH_RELEASE)                                     \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_STORE_CALL, __ATOMIC_RELEASE); \
		FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_STORE_CALL, __ATOMIC_SEQ_CST);       \
	}                                                                             \
	FI_XPU_I_ARCH_RMW_DEF(BITS, exchange)                                          \
	FI_XPU_I_ARCH_RMW_DEF(BITS, fetch_add)                                         \
	FI_XPU_I_ARCH_RMW_DEF(BITS, fetch_or)                                          \
	FI_XPU_I_ARCH_RMW_DEF(BITS, fetch_and)                                         \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_arch_cas_u##BITS(                   \
		uint##BITS##_t *p, uint##BITS##_t e, uint##BITS##_t d, int order,     \
		int mscope)                                                           \
	{                                                                             \
		switch (order) {                                                      \
		case FI_XPU_ARCH_RELAXED:                                             \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_CAS_CALL, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
		case FI_XPU_ARCH_ACQUIRE:                                             \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_CAS_CALL, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE); \
		case FI_XPU_ARCH_RELEASE:                                             \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_CAS_CALL, __ATOMIC_RELEASE, __ATOMIC_RELAXED); \
		case FI_XPU_ARCH_ACQ_REL:                                             \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_CAS_CALL, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE); \
		default:                                                              \
			FI_XPU_I_ARCH_SCOPED(FI_XPU_I_ARCH_CAS_CALL, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
		}                                                                     \
		return e;                                                             \
	}
FI_XPU_I_ARCH_DEF(32)
FI_XPU_I_ARCH_DEF(64)
#endif

#endif /* FI_XPU_INCLUDED_ARCH_ARCH_ATOMIC_H */
