/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device architecture layer: the only header that knows which
 * compiler and which target it is being compiled for. Everything above it
 * (the dispatch in fi_xpu_device.h, the cooperative helpers in
 * fi_xpu/device_coop.h, every provider's device header) is written against
 * the functions below and never tests a compiler macro itself.
 *
 * Targets, detected with the compilers' own macros so no SDK header is needed:
 *   FI_XPU_ARCH_NVPTX   NVIDIA device pass (nvcc, clang CUDA): __CUDA_ARCH__,
 *                       sm_70 or newer (scoped ld/st/atom need it)
 *   FI_XPU_ARCH_AMDGCN  AMD device pass (hipcc, clang HIP): __HIP_DEVICE_COMPILE__
 *   FI_XPU_ARCH_SPIRV   SYCL device pass: __SYCL_DEVICE_ONLY__
 *   FI_XPU_ARCH_HOST    anything else: plain C/C++ on CPU threads, the "host
 *                       XPU" (iface FI_HMEM_SYSTEM); work-item ids, barriers
 *                       and broadcasts come from the host launcher in
 *                       libfi_xpu (fi_xpu_host_launch), and a thread outside
 *                       any launch is a single work item (group of one).
 * Exactly one of them is defined to 1. FI_XPU_ARCH_NAME is its name as a
 * string.
 *
 * Qualifiers
 *   FI_XPU_FUNC          "static inline" plus the device qualifier of the
 *                        target (__attribute__((device)) under CUDA/HIP).
 *                        Every device-side function is declared with it.
 *   FI_XPU_FORCE_INLINE  FI_XPU_FUNC that the compiler must inline.
 *
 * Memory orders (values are the compilers' __ATOMIC_* numbers)
 *   FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_ACQUIRE, FI_XPU_ARCH_RELEASE,
 *   FI_XPU_ARCH_ACQ_REL, FI_XPU_ARCH_SEQ_CST
 *   Loads take RELAXED, ACQUIRE or SEQ_CST; stores RELAXED, RELEASE or
 *   SEQ_CST; read-modify-writes and fences any of them (a RELAXED fence does
 *   nothing). Any other value is treated as SEQ_CST.
 *
 * Memory scopes
 *   FI_XPU_ARCH_MS_DEVICE  coherent among all work items of this device
 *                          (CUDA .gpu, HIP "agent", SPIR-V Device).
 *   FI_XPU_ARCH_MS_SYSTEM  coherent with the host CPU and other devices:
 *                          use it for host-visible memory (proxy rings,
 *                          FI_XPU_ALLOC_HOST, peers' memory mapped over PCIe)
 *                          (CUDA .sys, HIP "" / system, SPIR-V CrossDevice).
 *   Any other value is treated as SYSTEM (the stronger one).
 *
 * Atomics (naturally aligned; T is u32 or u64)
 *   T    fi_xpu_arch_load_T(const T *p, int order, int mscope)
 *   void fi_xpu_arch_store_T(T *p, T v, int order, int mscope)
 *   T    fi_xpu_arch_exchange_T(T *p, T v, int order, int mscope)   -> old
 *   T    fi_xpu_arch_fetch_add_T(T *p, T v, int order, int mscope)  -> old
 *   T    fi_xpu_arch_fetch_or_T(T *p, T v, int order, int mscope)   -> old
 *   T    fi_xpu_arch_fetch_and_T(T *p, T v, int order, int mscope)  -> old
 *   T    fi_xpu_arch_cas_T(T *p, T expected, T desired, int order,
 *                          int mscope)  -> old value; it succeeded iff
 *                                          old == expected (strong CAS)
 *   void fi_xpu_arch_fence(int order, int mscope)
 *
 * Work-item geometry (all ids linear, counted from 0)
 *   uint32_t fi_xpu_arch_lane_id(void)        lane in the subgroup
 *   uint32_t fi_xpu_arch_subgroup_size(void)  the hardware subgroup width,
 *            queried, never assumed: 32 on NVIDIA, the wavefront size (64 or
 *            32) on AMD, the SPIR-V SubgroupMaxSize, the launcher's
 *            configured size on the host (1 outside a launch)
 *   uint32_t fi_xpu_arch_subgroup_id(void)    subgroup in the work group
 *   uint32_t fi_xpu_arch_local_id(void)       work item in the work group
 *   uint32_t fi_xpu_arch_group_size(void)     work items per work group
 *   uint32_t fi_xpu_arch_group_id(void)       work group in the launch
 *   uint32_t fi_xpu_arch_num_groups(void)     work groups in the launch
 *
 * Scopes (FI_XPU_WORK_ITEM, FI_XPU_SUBGROUP, FI_XPU_WORK_GROUP, FI_XPU_DEVICE)
 *   int      fi_xpu_arch_scope_check(int scope)
 *            0 when this target can run cooperative code at `scope`,
 *            -FI_EINVAL for a value that is not a scope, -FI_EOPNOTSUPP for
 *            FI_XPU_DEVICE on GPU targets (a grid-wide barrier needs a
 *            cooperative launch the header cannot know about). The host
 *            launcher supports every scope.
 *   uint32_t fi_xpu_arch_scope_rank(int scope)   rank of the caller in its
 *            scope instance (0 = the leader)
 *   uint32_t fi_xpu_arch_scope_size(int scope)   work items in the caller's
 *            scope instance; a trailing partial subgroup counts only the
 *            lanes it really has. Both return 0 / 1 for an unchecked scope.
 *            On NVIDIA (nvcc, or clang with a CUDA installation) and AMD
 *            the subgroup instance is the lanes converged at the call
 *            (activemask / EXEC): ranks are dense among them and the
 *            lowest is the leader; elsewhere it is every lane of the
 *            subgroup.
 *   int      fi_xpu_arch_barrier(int scope)  every work item of the scope
 *            instance waits for the others; memory written before the
 *            barrier is visible to the scope after it (work-group memory
 *            ordering, i.e. acq_rel at the scope). Returns
 *            fi_xpu_arch_scope_check(scope) and does nothing when non-zero.
 *   int      fi_xpu_arch_broadcast_u64(int scope, uint64_t *value)
 *            every work item of the scope instance calls it; afterwards
 *            *value holds the leader's (rank 0's) value everywhere.
 *            Same return codes as fi_xpu_arch_barrier.
 *   int      fi_xpu_arch_barrier_timeout(int scope, uint64_t timeout_ns,
 *                                        uint32_t *arrived)
 *            a barrier that gives up after timeout_ns when a member never
 *            arrives (-FI_ETIMEDOUT, *arrived members did); see its
 *            definition for what each target does.
 *
 * Waiting
 *   void     fi_xpu_arch_pause(void)     back-off hint inside spin loops (on
 *            the host it yields the CPU: host work items may outnumber cores)
 *   uint64_t fi_xpu_arch_clock_ns(void)  monotonic time in nanoseconds for
 *            timeouts (NVIDIA %globaltimer, AMD 100 MHz realtime counter,
 *            SPIR-V shader clock read as 1 GHz, host CLOCK_MONOTONIC)
 *
 * Copying
 *   FI_XPU_ARCH_MEMCPY(dst, src, n)  the compiler's inline memcpy; no C
 *            library header is needed (NVRTC has none: there it is the
 *            memcpy CUDA device code has built in)
 *   void fi_xpu_arch_bulk_copy(void *dst, const void *src, size_t n,
 *                              size_t total)   (host only)
 *            copies n bytes, one work item's share of a transfer of `total`
 *            bytes. On x86-64, from FI_XPU_HOST_NT_COPY_MIN total bytes on
 *            (default 4 MiB; define it before including to change it, 0
 *            turns it off) the destination is written with non-temporal
 *            stores, which skip reading it into the cache first, followed
 *            by an sfence; smaller transfers, and other CPUs, use memcpy.
 *            Data that large outgrows the caches the reader would find it
 *            in, so streaming it to memory costs the reader nothing and
 *            saves the writer a read of every destination line.
 *
 *   NVIDIA only (FI_XPU_I_ARCH_HAVE_GLOBAL16 defined):
 *   int  fi_xpu_arch_global2(const void *a, const void *b)  1 when both
 *            generic addresses lie in global memory (isspacep.global)
 *   void fi_xpu_arch_ld16_stream(uint64_t v[2], const void *src)
 *   void fi_xpu_arch_st16_global(void *dst, const uint64_t v[2])
 *            16 bytes, 16-byte aligned, of global memory: the load is
 *            ld.global.L1::no_allocate (a source read once is not kept in
 *            this SM's L1, which it would only evict other data from), the
 *            store st.global. Non-coherent (.nc) loads are never used: a
 *            buffer another agent may write during the kernel must not be
 *            read through the texture path.
 *
 * Every work item of a scope must call a cooperative function (barrier,
 * broadcast, and everything in fi_xpu/device_coop.h) the same number of
 * times with the same scope, as with __syncthreads().
 */
#ifndef FI_XPU_INCLUDED_DEVICE_ARCH_H
#define FI_XPU_INCLUDED_DEVICE_ARCH_H

/* Device code sees only the shared definitions; the host header comes in
 * below, for CPU threads alone (the host launcher's functions). */
#include <fi_xpu/freestanding.h>
#include <fi_xpu/handles.h>
#include <fi_xpu/version.h>

/* ---- target detection ------------------------------------------------- */

#if defined(__CUDA_ARCH__)
#define FI_XPU_ARCH_NVPTX 1
#define FI_XPU_ARCH_NAME "nvptx"
#if __CUDA_ARCH__ < 700
#error "fi_xpu device code needs sm_70 or newer (scoped atomics)"
#endif
#elif defined(__HIP_DEVICE_COMPILE__) || (defined(__HIP__) && defined(__AMDGCN__))
#define FI_XPU_ARCH_AMDGCN 1
#define FI_XPU_ARCH_NAME "amdgcn"
#elif defined(__SYCL_DEVICE_ONLY__)
#define FI_XPU_ARCH_SPIRV 1
#define FI_XPU_ARCH_NAME "spirv"
#elif defined(__CUDACC__) || defined(__CUDA__) || defined(__HIP__) || defined(__HIPCC__)
/* The host pass of a CUDA or HIP translation unit: device functions are
 * parsed but never generated or called here, so they get inert bodies. */
#define FI_XPU_ARCH_GPU_HOST_PASS 1
#define FI_XPU_ARCH_NAME "gpu-host-pass"
#else
#define FI_XPU_ARCH_HOST 1
#define FI_XPU_ARCH_NAME "host"
#endif

/* CUDA and HIP translation units are compiled twice (host and device); the
 * functions exist only for the device pass, and in plain C/C++ for the CPU. */
#if defined(__CUDACC__) || defined(__CUDA__) || defined(__HIP__) || defined(__HIPCC__)
#define FI_XPU_ARCH_QUALIFIER __attribute__((device))
#else
#define FI_XPU_ARCH_QUALIFIER
#endif

#define FI_XPU_FUNC static inline FI_XPU_ARCH_QUALIFIER
#if defined(__GNUC__) || defined(__clang__) || defined(__CUDACC__)
#define FI_XPU_FORCE_INLINE static inline __attribute__((always_inline)) FI_XPU_ARCH_QUALIFIER
#else
#define FI_XPU_FORCE_INLINE FI_XPU_FUNC
#endif
/* A function kept out of line: loops whose registers would otherwise add
 * to those of every kernel that inlines them (and lower its occupancy). */
#if defined(__GNUC__) || defined(__clang__) || defined(__CUDACC__)
#define FI_XPU_NOINLINE_FUNC static __attribute__((noinline, unused)) FI_XPU_ARCH_QUALIFIER
#else
#define FI_XPU_NOINLINE_FUNC FI_XPU_FUNC
#endif
/* The work behind a poll that found something (a CQ entry to take): out
 * of line on GPUs, so that the loop a kernel polls in holds the poll's
 * relaxed loads and a call, and none of the fences and atomics of the
 * work; inlined on the host, where it makes no difference. */
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define FI_XPU_POLL_WORK_FUNC FI_XPU_NOINLINE_FUNC
#else
#define FI_XPU_POLL_WORK_FUNC FI_XPU_FUNC
#endif

#define FI_XPU_ARCH_RELAXED 0
#define FI_XPU_ARCH_ACQUIRE 2
#define FI_XPU_ARCH_RELEASE 3
#define FI_XPU_ARCH_ACQ_REL 4
#define FI_XPU_ARCH_SEQ_CST 5

#define FI_XPU_ARCH_MS_DEVICE 0
#define FI_XPU_ARCH_MS_SYSTEM 1

/* The order of a poll's load (a CQ entry's sequence, a counter, a signal
 * word), which fences with acquire order once it found something: relaxed
 * on GPUs, where an acquire load invalidates the L1 on every turn; acquire
 * on CPU threads, where it costs nothing on x86 and lets ThreadSanitizer
 * pair the load with the store that published the word. */
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__) || \
	(defined(__HIP__) && defined(__AMDGCN__))
#define FI_XPU_ARCH_POLL FI_XPU_ARCH_RELAXED
#else
#define FI_XPU_ARCH_POLL FI_XPU_ARCH_ACQUIRE
#endif

#if defined(__CUDACC_RTC__)
#define FI_XPU_ARCH_MEMCPY(dst, src, n) memcpy(dst, src, n)
#else
#define FI_XPU_ARCH_MEMCPY(dst, src, n) __builtin_memcpy(dst, src, n)
#endif

/*
 * Publishes: every store or atomic by which device code hands data to
 * another agent (the host proxy, a peer process, the host reading a CQ or
 * counter) is written as FI_XPU_I_PUBLISH(kind, statement), the statement
 * including the release order or fence that makes the data visible first.
 * Normally the statement alone. With FI_XPU_I_SASS_MARKERS defined on
 * NVIDIA (tests/device_matrix/sass.rs only), the statement is bracketed by
 * performance monitor triggers (`pmevent.mask`, PMTRIG in SASS: 0x4000 |
 * kind before, 0x8000 | kind after), so the SASS check can find each
 * publish after inlining and check that a system-scope fence precedes its
 * store.
 */
#define FI_XPU_I_PUB_RING 1     /* a work request in the ofi proxy ring */
#define FI_XPU_I_PUB_CQ 2       /* a CQ entry, or a CQ slot handed back */
#define FI_XPU_I_PUB_CNTR 3     /* a counter */
#define FI_XPU_I_PUB_MSG 4      /* shm message slots, flow words, receives */
#define FI_XPU_I_PUB_SIGNAL 5   /* a signal word (fi_xpu_put_signal) */
#define FI_XPU_I_PUB_DOORBELL 6 /* the ofi proxy's doorbell (host only) */
#define FI_XPU_I_PUB_LOCK 7     /* the release of an endpoint lock */
#if defined(__CUDA_ARCH__) && defined(FI_XPU_I_SASS_MARKERS)
#define FI_XPU_I_PUBLISH(kind, ...)                                                    \
	do {                                                                          \
		asm volatile("pmevent.mask %0;" ::"n"(0x4000 | (kind)) : "memory");   \
		__VA_ARGS__;                                                          \
		asm volatile("pmevent.mask %0;" ::"n"(0x8000 | (kind)) : "memory");   \
	} while (0)
#else
#define FI_XPU_I_PUBLISH(kind, ...)                                                    \
	do {                                                                          \
		__VA_ARGS__;                                                          \
	} while (0)
#endif

/* Orders and scopes are almost always constants at the call site, so the
 * switches below fold away once inlined; each primitive gets its order and
 * scope as a constant, which some builtins require. */

/* ======================================================================= */
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

/* ======================================================================= */
#elif defined(FI_XPU_ARCH_AMDGCN)
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

/* ======================================================================= */
#elif defined(FI_XPU_ARCH_SPIRV)
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

/* ======================================================================= */
#elif defined(FI_XPU_ARCH_GPU_HOST_PASS)
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

/* ======================================================================= */
#else /* FI_XPU_ARCH_HOST */
/*
 * CPU threads. The memory scope makes no difference on a cache-coherent
 * host; work-item geometry and the barriers come from the host launcher,
 * declared by the host header (the one place device code may include it).
 */
#include <fi_xpu.h>

#ifdef FI_XPU_HOST_WEAK_ORDER
/*
 * The weak-ordering mode's instrumentation (fi_xpu_host_launch(3)): with
 * FI_XPU_HOST_WEAK_ORDER defined before this header, every atomic, fence
 * and data copy (fi_xpu_arch_bulk_copy) of the host arch calls the
 * launcher, which holds data stores back per work item until a release of
 * the right memory scope when the launch runs in the mode
 * (FI_XPU_HOST_WEAK_ORDER=1 in the environment), and does the plain
 * operation otherwise. Plain C loads and stores are not instrumented;
 * barriers and broadcasts release at system scope. The model and its
 * limits: the launcher's man page.
 */
#define fi_xpu_i_arch_atomic_load(p, o, s) fi_xpu_host_weak_load(p, sizeof(*(p)), o, s)
#define fi_xpu_i_arch_atomic_store(p, v, o, s)                                 \
	fi_xpu_host_weak_store(p, sizeof(*(p)), (uint64_t)(v), o, s)
#define fi_xpu_i_arch_weak_rmw(p, op, v, o, s)                                \
	fi_xpu_host_weak_rmw(p, sizeof(*(p)), op, (uint64_t)(v), 0, o, s)
#define fi_xpu_i_arch_atomic_exchange(p, v, o, s)                              \
	fi_xpu_i_arch_weak_rmw(p, FI_XPU_HOST_WEAK_XCHG, v, o, s)
#define fi_xpu_i_arch_atomic_fetch_add(p, v, o, s)                             \
	fi_xpu_i_arch_weak_rmw(p, FI_XPU_HOST_WEAK_ADD, v, o, s)
#define fi_xpu_i_arch_atomic_fetch_or(p, v, o, s)                              \
	fi_xpu_i_arch_weak_rmw(p, FI_XPU_HOST_WEAK_OR, v, o, s)
#define fi_xpu_i_arch_atomic_fetch_and(p, v, o, s)                             \
	fi_xpu_i_arch_weak_rmw(p, FI_XPU_HOST_WEAK_AND, v, o, s)
/* The old value into *e, as __atomic_compare_exchange_n leaves it. */
#define fi_xpu_i_arch_atomic_cas(p, e, d, o, f, s)                             \
	(*(e) = fi_xpu_host_weak_rmw(p, sizeof(*(p)), FI_XPU_HOST_WEAK_CAS,     \
				     (uint64_t)*(e), (uint64_t)(d), o, s))
#define FI_XPU_I_ARCH_SCOPED(CALL, ...)                                        \
	do {                                                                  \
		CALL(__VA_ARGS__, mscope)                                     \
	} while (0)
#else
#define fi_xpu_i_arch_atomic_load(p, o, s) __atomic_load_n(p, o)
#define fi_xpu_i_arch_atomic_store(p, v, o, s) __atomic_store_n(p, v, o)
#define fi_xpu_i_arch_atomic_exchange(p, v, o, s) __atomic_exchange_n(p, v, o)
#define fi_xpu_i_arch_atomic_fetch_add(p, v, o, s) __atomic_fetch_add(p, v, o)
#define fi_xpu_i_arch_atomic_fetch_or(p, v, o, s) __atomic_fetch_or(p, v, o)
#define fi_xpu_i_arch_atomic_fetch_and(p, v, o, s) __atomic_fetch_and(p, v, o)
#define fi_xpu_i_arch_atomic_cas(p, e, d, o, f, s) __atomic_compare_exchange_n(p, e, d, 0, o, f)
#define FI_XPU_I_ARCH_SCOPED(CALL, ...)                                        \
	do {                                                                  \
		(void)mscope;                                                 \
		CALL(__VA_ARGS__, 0)                                          \
	} while (0)
#endif
#define FI_XPU_I_ARCH_HAVE_BUILTIN_ATOMICS 1

/*
 * The host launcher synchronises its threads inside libfi_xpu, out of sight
 * of ThreadSanitizer when only the C side is instrumented. Under TSan every
 * host barrier and broadcast also passes through one atomic here (acq_rel
 * before, acquire after), so the tool sees the ordering the barrier gives.
 * TSan does not model fences; there they become an RMW of that atomic.
 */
#if defined(FI_XPU_ARCH_HOST)
#if defined(__SANITIZE_THREAD__)
#define FI_XPU_I_ARCH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FI_XPU_I_ARCH_TSAN 1
#endif
#endif
#ifdef FI_XPU_I_ARCH_TSAN
static uint64_t fi_xpu_i_arch_tsan_sync;
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_tsan_release(void)
{
	__atomic_fetch_add(&fi_xpu_i_arch_tsan_sync, 1, __ATOMIC_ACQ_REL);
}
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_tsan_acquire(void)
{
	(void)__atomic_load_n(&fi_xpu_i_arch_tsan_sync, __ATOMIC_ACQUIRE);
}
#else
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_tsan_release(void) {}
FI_XPU_FORCE_INLINE void fi_xpu_i_arch_tsan_acquire(void) {}
#endif
#endif

FI_XPU_FORCE_INLINE void fi_xpu_arch_fence(int order, int mscope)
{
	(void)mscope;
#ifdef FI_XPU_HOST_WEAK_ORDER
	fi_xpu_host_weak_fence(order, mscope);
	return;
#endif
#ifdef FI_XPU_I_ARCH_TSAN
	if (order != FI_XPU_ARCH_RELAXED)
		fi_xpu_i_arch_tsan_release();
	return;
#endif
	switch (order) {
	case FI_XPU_ARCH_RELAXED: break;
	case FI_XPU_ARCH_ACQUIRE: __atomic_thread_fence(__ATOMIC_ACQUIRE); break;
	case FI_XPU_ARCH_RELEASE: __atomic_thread_fence(__ATOMIC_RELEASE); break;
	case FI_XPU_ARCH_ACQ_REL: __atomic_thread_fence(__ATOMIC_ACQ_REL); break;
	default: __atomic_thread_fence(__ATOMIC_SEQ_CST); break;
	}
}

#ifndef FI_XPU_HOST_NT_COPY_MIN
#define FI_XPU_HOST_NT_COPY_MIN 4194304 /* 4 MiB */
#endif

#if defined(__x86_64__) && defined(__SSE2__) && FI_XPU_HOST_NT_COPY_MIN > 0
#include <emmintrin.h>
/* Streams n bytes to dst: memcpy up to dst's next 16-byte boundary, then
 * 64 bytes a round through non-temporal 16-byte stores, memcpy for the
 * tail. The sfence orders the streamed stores before whatever the caller
 * publishes next (they are not ordered by x86's ordinary store order). */
FI_XPU_FUNC void fi_xpu_i_arch_stream_copy(unsigned char *d, const unsigned char *s, size_t n)
{
	size_t head = (size_t)(-(uintptr_t)d & 15u), i;

	if (head > n)
		head = n;
	FI_XPU_ARCH_MEMCPY(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (i = 0; i + 64 <= n; i += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
		_mm_stream_si128((__m128i *)(void *)(d + i), a);
		_mm_stream_si128((__m128i *)(void *)(d + i + 16), b);
		_mm_stream_si128((__m128i *)(void *)(d + i + 32), c);
		_mm_stream_si128((__m128i *)(void *)(d + i + 48), e);
	}
	FI_XPU_ARCH_MEMCPY(d + i, s + i, n - i);
	_mm_sfence();
}
#define FI_XPU_I_ARCH_STREAM_COPY 1
#endif

FI_XPU_FUNC void fi_xpu_arch_bulk_copy(void *dst, const void *src, size_t n, size_t total)
{
#ifdef FI_XPU_HOST_WEAK_ORDER
	/* Held back in the work item's buffer until a release. */
	(void)total;
	fi_xpu_host_weak_copy(dst, src, n);
	return;
#endif
#ifdef FI_XPU_I_ARCH_STREAM_COPY
	if (total >= (size_t)FI_XPU_HOST_NT_COPY_MIN) {
		fi_xpu_i_arch_stream_copy((unsigned char *)dst, (const unsigned char *)src, n);
		return;
	}
#endif
	(void)total;
	FI_XPU_ARCH_MEMCPY(dst, src, n);
}

FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_lane_id(void) { return fi_xpu_host_item()->lane_id; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_subgroup_size(void) { return fi_xpu_host_item()->subgroup_size; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_subgroup_id(void) { return fi_xpu_host_item()->subgroup_id; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_local_id(void) { return fi_xpu_host_item()->local_id; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_group_size(void) { return fi_xpu_host_item()->group_size; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_group_id(void) { return fi_xpu_host_item()->group_id; }
FI_XPU_FORCE_INLINE uint32_t fi_xpu_arch_num_groups(void) { return fi_xpu_host_item()->num_groups; }
FI_XPU_FORCE_INLINE void fi_xpu_arch_pause(void) { fi_xpu_host_pause(); }
FI_XPU_FORCE_INLINE uint64_t fi_xpu_arch_clock_ns(void) { return fi_xpu_host_clock_ns(); }
#define FI_XPU_I_ARCH_DEVICE_SCOPE_OK 1
#endif

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

#endif /* FI_XPU_INCLUDED_DEVICE_ARCH_H */
