/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device architecture layer: the NVIDIA backend (nvcc, clang CUDA, NVRTC).
 * Part of <fi_xpu/device_arch.h>, which states what every function means
 * on every target; included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_ARCH_H
#include <fi_xpu/device_arch.h>
#endif
#ifndef FI_XPU_INCLUDED_ARCH_ARCH_NVPTX_H
#define FI_XPU_INCLUDED_ARCH_ARCH_NVPTX_H
#if defined(FI_XPU_ARCH_NVPTX)

/*
 * PTX inline assembly, understood by nvcc and clang alike and independent of
 * the PTX ISA version clang assumes without a CUDA installation. Scoped
 * semantics (.relaxed/.acquire/.release/.acq_rel with .gpu/.sys) are
 * sm_70's memory model; seq_cst is fence.sc followed by the acquire/release
 * form, as the PTX memory model prescribes.
 */
#define FI_XPU_I_ARCH_PTX_LD(SEM, SC, BITS, C)                                         \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_i_arch_ld_##SEM##_##SC##_u##BITS(    \
		const uint##BITS##_t *p)                                              \
	{                                                                             \
		uint##BITS##_t v;                                                     \
		asm volatile("ld." #SEM "." #SC ".b" #BITS " %0, [%1];"               \
			     : "=" C(v) : "l"(p) : "memory");                         \
		return v;                                                             \
	}
#define FI_XPU_I_ARCH_PTX_ST(SEM, SC, BITS, C)                                         \
	FI_XPU_FORCE_INLINE void fi_xpu_i_arch_st_##SEM##_##SC##_u##BITS(              \
		uint##BITS##_t *p, uint##BITS##_t v)                                  \
	{                                                                             \
		asm volatile("st." #SEM "." #SC ".b" #BITS " [%0], %1;"               \
			     :: "l"(p), C(v) : "memory");                             \
	}
#define FI_XPU_I_ARCH_PTX_RMW(OP, PTXOP, SEM, SC, BITS, C)                             \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_i_arch_##OP##_##SEM##_##SC##_u##BITS( \
		uint##BITS##_t *p, uint##BITS##_t v)                                  \
	{                                                                             \
		uint##BITS##_t old;                                                   \
		asm volatile("atom." #SEM "." #SC "." PTXOP " %0, [%1], %2;"          \
			     : "=" C(old) : "l"(p), C(v) : "memory");                 \
		return old;                                                           \
	}
#define FI_XPU_I_ARCH_PTX_CAS(SEM, SC, BITS, C)                                        \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_i_arch_cas_##SEM##_##SC##_u##BITS(   \
		uint##BITS##_t *p, uint##BITS##_t e, uint##BITS##_t d)                \
	{                                                                             \
		uint##BITS##_t old;                                                   \
		asm volatile("atom." #SEM "." #SC ".cas.b" #BITS " %0, [%1], %2, %3;" \
			     : "=" C(old) : "l"(p), C(e), C(d) : "memory");           \
		return old;                                                           \
	}
#define FI_XPU_I_ARCH_PTX_SCOPES(M, ...) M(__VA_ARGS__, gpu) M(__VA_ARGS__, sys)
#define FI_XPU_I_ARCH_PTX_LD2(SEM, SC) FI_XPU_I_ARCH_PTX_LD(SEM, SC, 32, "r") FI_XPU_I_ARCH_PTX_LD(SEM, SC, 64, "l")
#define FI_XPU_I_ARCH_PTX_ST2(SEM, SC) FI_XPU_I_ARCH_PTX_ST(SEM, SC, 32, "r") FI_XPU_I_ARCH_PTX_ST(SEM, SC, 64, "l")
#define FI_XPU_I_ARCH_PTX_RMW2(SEM, SC)                                               \
	FI_XPU_I_ARCH_PTX_RMW(xchg, "exch.b32", SEM, SC, 32, "r")                     \
	FI_XPU_I_ARCH_PTX_RMW(xchg, "exch.b64", SEM, SC, 64, "l")                     \
	FI_XPU_I_ARCH_PTX_RMW(add, "add.u32", SEM, SC, 32, "r")                       \
	FI_XPU_I_ARCH_PTX_RMW(add, "add.u64", SEM, SC, 64, "l")                       \
	FI_XPU_I_ARCH_PTX_RMW(or, "or.b32", SEM, SC, 32, "r")                         \
	FI_XPU_I_ARCH_PTX_RMW(or, "or.b64", SEM, SC, 64, "l")                         \
	FI_XPU_I_ARCH_PTX_RMW(and, "and.b32", SEM, SC, 32, "r")                       \
	FI_XPU_I_ARCH_PTX_RMW(and, "and.b64", SEM, SC, 64, "l")                       \
	FI_XPU_I_ARCH_PTX_CAS(SEM, SC, 32, "r")                                       \
	FI_XPU_I_ARCH_PTX_CAS(SEM, SC, 64, "l")
FI_XPU_I_ARCH_PTX_SCOPES(FI_XPU_I_ARCH_PTX_LD2, relaxed)
FI_XPU_I_ARCH_PTX_SCOPES(FI_XPU_I_ARCH_PTX_LD2, acquire)
FI_XPU_I_ARCH_PTX_SCOPES(FI_XPU_I_ARCH_PTX_ST2, relaxed)
FI_XPU_I_ARCH_PTX_SCOPES(FI_XPU_I_ARCH_PTX_ST2, release)
FI_XPU_I_ARCH_PTX_SCOPES(FI_XPU_I_ARCH_PTX_RMW2, relaxed)
FI_XPU_I_ARCH_PTX_SCOPES(FI_XPU_I_ARCH_PTX_RMW2, acquire)
FI_XPU_I_ARCH_PTX_SCOPES(FI_XPU_I_ARCH_PTX_RMW2, release)
FI_XPU_I_ARCH_PTX_SCOPES(FI_XPU_I_ARCH_PTX_RMW2, acq_rel)

FI_XPU_FORCE_INLINE void fi_xpu_i_arch_fence_sc(int mscope)
{
	if (mscope == FI_XPU_ARCH_MS_DEVICE)
		asm volatile("fence.sc.gpu;" ::: "memory");
	else
		asm volatile("fence.sc.sys;" ::: "memory");
}

FI_XPU_FORCE_INLINE void fi_xpu_arch_fence(int order, int mscope)
{
	if (order == FI_XPU_ARCH_RELAXED)
		return;
	if (order == FI_XPU_ARCH_ACQUIRE || order == FI_XPU_ARCH_RELEASE ||
	    order == FI_XPU_ARCH_ACQ_REL) {
		if (mscope == FI_XPU_ARCH_MS_DEVICE)
			asm volatile("fence.acq_rel.gpu;" ::: "memory");
		else
			asm volatile("fence.acq_rel.sys;" ::: "memory");
		return;
	}
	fi_xpu_i_arch_fence_sc(mscope);
}

#define FI_XPU_I_ARCH_SC(NAME, SEM, BITS, ...)                                 \
	(mscope == FI_XPU_ARCH_MS_DEVICE ?                                    \
		 fi_xpu_i_arch_##NAME##_##SEM##_gpu_u##BITS(__VA_ARGS__) :     \
		 fi_xpu_i_arch_##NAME##_##SEM##_sys_u##BITS(__VA_ARGS__))

#define FI_XPU_I_ARCH_DEF(BITS)                                                         \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_arch_load_u##BITS(                   \
		const uint##BITS##_t *p, int order, int mscope)                        \
	{                                                                              \
		if (order == FI_XPU_ARCH_RELAXED)                                      \
			return FI_XPU_I_ARCH_SC(ld, relaxed, BITS, p);                  \
		if (order != FI_XPU_ARCH_ACQUIRE)                                      \
			fi_xpu_i_arch_fence_sc(mscope);                                 \
		return FI_XPU_I_ARCH_SC(ld, acquire, BITS, p);                          \
	}                                                                              \
	FI_XPU_FORCE_INLINE void fi_xpu_arch_store_u##BITS(                            \
		uint##BITS##_t *p, uint##BITS##_t v, int order, int mscope)            \
	{                                                                              \
		if (order == FI_XPU_ARCH_RELAXED) {                                    \
			FI_XPU_I_ARCH_SC(st, relaxed, BITS, p, v);                      \
			return;                                                        \
		}                                                                      \
		if (order != FI_XPU_ARCH_RELEASE)                                      \
			fi_xpu_i_arch_fence_sc(mscope);                                 \
		FI_XPU_I_ARCH_SC(st, release, BITS, p, v);                              \
	}                                                                              \
	FI_XPU_I_ARCH_RMW_DEF(exchange, xchg, BITS)                                     \
	FI_XPU_I_ARCH_RMW_DEF(fetch_add, add, BITS)                                     \
	FI_XPU_I_ARCH_RMW_DEF(fetch_or, or, BITS)                                       \
	FI_XPU_I_ARCH_RMW_DEF(fetch_and, and, BITS)                                     \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_arch_cas_u##BITS(                    \
		uint##BITS##_t *p, uint##BITS##_t e, uint##BITS##_t d, int order,      \
		int mscope)                                                            \
	{                                                                              \
		switch (order) {                                                       \
		case FI_XPU_ARCH_RELAXED: return FI_XPU_I_ARCH_SC(cas, relaxed, BITS, p, e, d); \
		case FI_XPU_ARCH_ACQUIRE: return FI_XPU_I_ARCH_SC(cas, acquire, BITS, p, e, d); \
		case FI_XPU_ARCH_RELEASE: return FI_XPU_I_ARCH_SC(cas, release, BITS, p, e, d); \
		case FI_XPU_ARCH_ACQ_REL: return FI_XPU_I_ARCH_SC(cas, acq_rel, BITS, p, e, d); \
		default:                                                               \
			fi_xpu_i_arch_fence_sc(mscope);                                 \
			return FI_XPU_I_ARCH_SC(cas, acq_rel, BITS, p, e, d);           \
		}                                                                      \
	}
#define FI_XPU_I_ARCH_RMW_DEF(NAME, OP, BITS)                                           \
	FI_XPU_FORCE_INLINE uint##BITS##_t fi_xpu_arch_##NAME##_u##BITS(               \
		uint##BITS##_t *p, uint##BITS##_t v, int order, int mscope)            \
	{                                                                              \
		switch (order) {                                                       \
		case FI_XPU_ARCH_RELAXED: return FI_XPU_I_ARCH_SC(OP, relaxed, BITS, p, v); \
		case FI_XPU_ARCH_ACQUIRE: return FI_XPU_I_ARCH_SC(OP, acquire, BITS, p, v); \
		case FI_XPU_ARCH_RELEASE: return FI_XPU_I_ARCH_SC(OP, release, BITS, p, v); \
		case FI_XPU_ARCH_ACQ_REL: return FI_XPU_I_ARCH_SC(OP, acq_rel, BITS, p, v); \
		default:                                                               \
			fi_xpu_i_arch_fence_sc(mscope);                                 \
			return FI_XPU_I_ARCH_SC(OP, acq_rel, BITS, p, v);               \
		}                                                                      \
	}
FI_XPU_I_ARCH_DEF(32)
FI_XPU_I_ARCH_DEF(64)

#define FI_XPU_I_ARCH_SREG(NAME, REG)                                          \
	FI_XPU_FORCE_INLINE uint32_t fi_xpu_i_arch_##NAME(void)                \
	{                                                                     \
		uint32_t v;                                                   \
		asm("mov.u32 %0, %%" REG ";" : "=r"(v));                      \
		return v;                                                     \
	}
FI_XPU_I_ARCH_SREG(laneid, "laneid")
FI_XPU_I_ARCH_SREG(tid_x, "tid.x")
FI_XPU_I_ARCH_SREG(tid_y, "tid.y")
FI_XPU_I_ARCH_SREG(tid_z, "tid.z")
FI_XPU_I_ARCH_SREG(ntid_x, "ntid.x")
FI_XPU_I_ARCH_SREG(ntid_y, "ntid.y")
FI_XPU_I_ARCH_SREG(ntid_z, "ntid.z")
FI_XPU_I_ARCH_SREG(ctaid_x, "ctaid.x")
FI_XPU_I_ARCH_SREG(ctaid_y, "ctaid.y")
FI_XPU_I_ARCH_SREG(ctaid_z, "ctaid.z")
FI_XPU_I_ARCH_SREG(nctaid_x, "nctaid.x")
FI_XPU_I_ARCH_SREG(nctaid_y, "nctaid.y")
FI_XPU_I_ARCH_SREG(nctaid_z, "nctaid.z")

FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_lane_id(void) { return fi_xpu_i_arch_laneid(); }
/* WARP_SZ is a PTX constant; 32 on every NVIDIA architecture so far. */
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_subgroup_size(void)
{
	uint32_t v;
	asm("mov.u32 %0, WARP_SZ;" : "=r"(v));
	return v;
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_local_id(void)
{
	return fi_xpu_i_arch_tid_x() +
	       fi_xpu_i_arch_ntid_x() * (fi_xpu_i_arch_tid_y() + fi_xpu_i_arch_ntid_y() * fi_xpu_i_arch_tid_z());
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_group_size(void)
{
	return fi_xpu_i_arch_ntid_x() * fi_xpu_i_arch_ntid_y() * fi_xpu_i_arch_ntid_z();
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_group_id(void)
{
	return fi_xpu_i_arch_ctaid_x() +
	       fi_xpu_i_arch_nctaid_x() * (fi_xpu_i_arch_ctaid_y() + fi_xpu_i_arch_nctaid_y() * fi_xpu_i_arch_ctaid_z());
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_num_groups(void)
{
	return fi_xpu_i_arch_nctaid_x() * fi_xpu_i_arch_nctaid_y() * fi_xpu_i_arch_nctaid_z();
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_subgroup_id(void)
{
	return fi_xpu_arch_local_id() / fi_xpu_arch_subgroup_size();
}
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_group_sync(void)
{
	asm volatile("bar.sync 0;" ::: "memory");
}
/* The subgroup of a call is the lanes converged at it (activemask, PTX ISA
 * 6.2). clang without a CUDA installation emits older PTX, so there the
 * subgroup is every lane the launch gave the warp. */
#if !defined(__clang__) || defined(CUDA_VERSION)
#define FI_XPU_I_ARCH_SUBGROUP_CONVERGED 1
FI_XPU_FORCE_INLINE uint32_t fi_xpu_i_arch_subgroup_mask(void)
{
	uint32_t m;
	asm volatile("activemask.b32 %0;" : "=r"(m));
	return m;
}
#else
FI_XPU_FORCE_INLINE uint32_t fi_xpu_i_arch_subgroup_mask(void)
{
	uint32_t left = fi_xpu_arch_group_size() - fi_xpu_arch_subgroup_id() * 32u;
	return left >= 32 ? 0xffffffffu : (1u << left) - 1u;
}
#endif
FI_XPU_FORCE_INLINE uint32_t fi_xpu_i_arch_popc(uint32_t v)
{
	uint32_t n;
	asm("popc.b32 %0, %1;" : "=r"(n) : "r"(v));
	return n;
}
/* Rank among the members (lanes below this one), and how many there are. */
FI_XPU_FORCE_INLINE uint32_t fi_xpu_i_arch_subgroup_rank(void)
{
	uint32_t lt;
	asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
	return fi_xpu_i_arch_popc(fi_xpu_i_arch_subgroup_mask() & lt);
}
FI_XPU_FORCE_INLINE uint32_t fi_xpu_i_arch_subgroup_count(void)
{
	return fi_xpu_i_arch_popc(fi_xpu_i_arch_subgroup_mask());
}
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_subgroup_sync(void)
{
	asm volatile("bar.warp.sync %0;" :: "r"(fi_xpu_i_arch_subgroup_mask()) : "memory");
}
/* From the lowest member, the leader (rank 0). */
FI_XPU_FORCE_INLINE uint64_t fi_xpu_i_arch_subgroup_bcast(uint64_t v)
{
	uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32), m = fi_xpu_i_arch_subgroup_mask(), src;
	asm("bfind.u32 %0, %1;" : "=r"(src) : "r"(m & (0u - m)));
	asm volatile("shfl.sync.idx.b32 %0, %0, %1, 0x1f, %2;" : "+r"(lo) : "r"(src), "r"(m));
	asm volatile("shfl.sync.idx.b32 %0, %0, %1, 0x1f, %2;" : "+r"(hi) : "r"(src), "r"(m));
	return ((uint64_t)hi << 32) | lo;
}
/* nanosleep needs PTX ISA 6.3; clang without a CUDA installation emits
 * older PTX, so it only spins there. */
FI_XPU_FORCE_INLINE void fi_xpu_arch_pause(void)
{
#if !defined(__clang__) || defined(CUDA_VERSION)
	asm volatile("nanosleep.u32 64;" ::: "memory");
#endif
}
FI_XPU_FORCE_INLINE uint64_t fi_xpu_arch_clock_ns(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
/* 1 when both generic addresses are in the global window (not shared or
 * local memory), where ld.global/st.global may reach them. */
FI_XPU_FORCE_INLINE int fi_xpu_arch_global2(const void *a, const void *b)
{
	uint32_t ga, gb;
	asm("{ .reg .pred p; isspacep.global p, %1; selp.u32 %0, 1, 0, p; }"
	    : "=r"(ga) : "l"(a));
	asm("{ .reg .pred p; isspacep.global p, %1; selp.u32 %0, 1, 0, p; }"
	    : "=r"(gb) : "l"(b));
	return (int)(ga & gb);
}
/* L1::no_allocate needs PTX ISA 7.4; clang without a CUDA installation
 * emits older PTX, so there the load is a plain global one. */
#if !defined(__clang__) || defined(CUDA_VERSION)
#define FI_XPU_I_ARCH_LD16_HINT ".L1::no_allocate"
#else
#define FI_XPU_I_ARCH_LD16_HINT ""
#endif
FI_XPU_FORCE_INLINE void fi_xpu_arch_ld16_stream(uint64_t v[2], const void *src)
{
	asm volatile("ld.global" FI_XPU_I_ARCH_LD16_HINT ".v2.u64 {%0, %1}, [%2];"
		     : "=l"(v[0]), "=l"(v[1]) : "l"(src) : "memory");
}
FI_XPU_FORCE_INLINE void fi_xpu_arch_st16_global(void *dst, const uint64_t v[2])
{
	asm volatile("st.global.v2.u64 [%0], {%1, %2};" :: "l"(dst), "l"(v[0]), "l"(v[1])
		     : "memory");
}
#define FI_XPU_I_ARCH_HAVE_GLOBAL16 1
/* Tells this launch's work group from any other: the launch number
 * (%gridid) and the work group. */
FI_XPU_FORCE_INLINE uint64_t fi_xpu_i_arch_launch_id(void)
{
	uint64_t g;
	asm("mov.u64 %0, %%gridid;" : "=l"(g));
	return g;
}
#define FI_XPU_I_ARCH_DEVICE_SCOPE_OK 0
#endif /* defined(FI_XPU_ARCH_NVPTX) */

#endif /* FI_XPU_INCLUDED_ARCH_ARCH_NVPTX_H */
