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

/* The target's primitives, one backend per target, then what the targets
 * share (under fi_xpu/arch/). */
#if defined(FI_XPU_ARCH_NVPTX)
#include <fi_xpu/arch/arch__nvptx.h>
#elif defined(FI_XPU_ARCH_AMDGCN)
#include <fi_xpu/arch/arch__amdgcn.h>
#elif defined(FI_XPU_ARCH_SPIRV)
#include <fi_xpu/arch/arch__spirv.h>
#elif defined(FI_XPU_ARCH_GPU_HOST_PASS)
#include <fi_xpu/arch/arch__gpu_host_pass.h>
#else
#include <fi_xpu/arch/arch__host.h>
#endif
#include <fi_xpu/arch/arch__atomic.h>
#include <fi_xpu/arch/arch__group.h>

#endif /* FI_XPU_INCLUDED_DEVICE_ARCH_H */
