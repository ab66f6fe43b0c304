/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device architecture layer: CPU threads, the host XPU (the host
 * launcher's work items, its weak-ordering mode, ThreadSanitizer's view).
 * Part of <fi_xpu/device_arch.h>, which states what every function means
 * on every target; included from there, or includes it when included first.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_ARCH_H
#include <fi_xpu/device_arch.h>
#endif
#ifndef FI_XPU_INCLUDED_ARCH_ARCH_HOST_H
#define FI_XPU_INCLUDED_ARCH_ARCH_HOST_H
#if defined(FI_XPU_ARCH_HOST)

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
#endif /* defined(FI_XPU_ARCH_HOST) */

#endif /* FI_XPU_INCLUDED_ARCH_ARCH_HOST_H */
