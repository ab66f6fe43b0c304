/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Cooperative building blocks shared by every provider's device code.
 *
 * All work items of a scope instance (FI_XPU_WORK_ITEM, FI_XPU_SUBGROUP,
 * FI_XPU_WORK_GROUP, FI_XPU_DEVICE; see fi_xpu/device_arch.h) call these
 * together with the same arguments, and get the same result.
 *
 *   int fi_xpu_coop_reserve(uint64_t *counter, uint64_t n, int scope,
 *                           int mscope, uint64_t *base)
 *       The leader adds n to *counter with one atomic (acq_rel at memory
 *       scope mscope) and broadcasts the old value; every work item gets it
 *       in *base, so the scope owns slots [*base, *base + n).
 *
 *   int fi_xpu_coop_reserve_below(uint64_t *counter, uint64_t n,
 *                                 uint64_t limit, int scope, int mscope,
 *                                 uint64_t *base)
 *       Same, but only if *counter + n <= limit afterwards (a ring with
 *       `limit` = consumer index + ring size): -FI_EAGAIN for everyone when
 *       the slots are not there; *counter is left unchanged then. The
 *       leader's `limit` is the one used.
 *
 *   int fi_xpu_coop_copy(void *dst, const void *src, size_t len, int scope,
 *                        int mscope)
 *       Each work item copies its share of the buffer (on GPUs interleaved
 *       16-byte words where source and destination allow, so lanes
 *       coalesce; contiguous chunks on CPU threads), then orders its writes at mscope (a release
 *       fence) and meets the others at a scope barrier: on return the whole
 *       copy is done, and a release store by any work item of the scope
 *       publishes it to observers at mscope.
 *
 *   int fi_xpu_coop_part(size_t len, uint32_t part, uint32_t parts,
 *                        size_t *off, size_t *n)
 *       Part `part` of `parts` of a transfer of `len` bytes shared by
 *       several groups (fi_xpu_coop_write_part and
 *       fi_xpu_coop_put_signal_part, fi_xpu/device.h): [*off, *off + *n).
 *       The u = ceil(len / 16) 16-byte units are dealt out in order, as
 *       evenly as they divide (the first u % parts parts get one more), so
 *       every offset is a multiple of 16 and only the last part with bytes
 *       may end short of a unit; parts past the last unit are empty (*off =
 *       len, *n = 0), which happens only when len < parts * 16. Not a group
 *       call: any work item may ask. -FI_EINVAL when part >= parts (so
 *       when parts is 0); nothing is written then.
 *
 *   int fi_xpu_coop_broadcast_int(int scope, int value)
 *       The leader's value for everyone (e.g. the status of a post the
 *       leader made); returns a scope error instead when the scope is bad.
 *
 *   fi_xpu_coop_cntr_read / _update / _wait
 *       Counters kept as {value, errors} words (see the section below;
 *       these follow the per-work-item scope meaning of the device API).
 *
 * Return values: 0, -FI_EINVAL for a value that is not a scope, and
 * -FI_EOPNOTSUPP for a scope the target cannot run cooperatively
 * (FI_XPU_DEVICE on GPUs); nothing is reserved or copied then.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_COOP_H
#define FI_XPU_INCLUDED_DEVICE_COOP_H

#include <fi_xpu/device_arch.h>
#include <fi_xpu/device_group.h>
#include <fi_xpu/device_handle.h>

/* Marks "no slots" in the leader's broadcast: a 64-bit counter that only
 * grows never reaches it. */
#define FI_XPU_I_COOP_FULL (~(uint64_t)0)

FI_XPU_FUNC int fi_xpu_coop_reserve(uint64_t *counter, uint64_t n, int scope, int mscope,
				    uint64_t *base)
{
	uint64_t b = 0;
	int ret = fi_xpu_arch_scope_check(scope);

	if (ret)
		return ret;
	if (fi_xpu_arch_scope_rank(scope) == 0)
		b = fi_xpu_arch_fetch_add_u64(counter, n, FI_XPU_ARCH_ACQ_REL, mscope);
	ret = fi_xpu_arch_broadcast_u64(scope, &b);
	if (!ret)
		*base = b;
	return ret;
}

FI_XPU_FUNC int fi_xpu_coop_reserve_below(uint64_t *counter, uint64_t n, uint64_t limit,
					  int scope, int mscope, uint64_t *base)
{
	uint64_t b = FI_XPU_I_COOP_FULL;
	int ret = fi_xpu_arch_scope_check(scope);

	if (ret)
		return ret;
	if (fi_xpu_arch_scope_rank(scope) == 0) {
		uint64_t cur = fi_xpu_arch_load_u64(counter, FI_XPU_ARCH_RELAXED, mscope);
		while (cur + n <= limit && cur + n >= cur) {
			uint64_t seen = fi_xpu_arch_cas_u64(counter, cur, cur + n,
							    FI_XPU_ARCH_ACQ_REL, mscope);
			if (seen == cur) {
				b = cur;
				break;
			}
			cur = seen;
		}
	}
	ret = fi_xpu_arch_broadcast_u64(scope, &b);
	if (ret)
		return ret;
	if (b == FI_XPU_I_COOP_FULL)
		return -FI_EAGAIN;
	*base = b;
	return 0;
}

/* 16 bytes, 16-byte aligned: one vector load and store on GPUs
 * (LDG.E.128/STG.E.128 on NVIDIA, global_load_dwordx4 on AMD). */
struct __attribute__((aligned(16))) fi_xpu_i_coop_v16 {
	uint64_t w[2];
};
#if defined(__has_builtin)
#if __has_builtin(__builtin_assume_aligned)
#define FI_XPU_I_COOP_ALIGNED16(p) __builtin_assume_aligned(p, 16)
#endif
#endif
#if !defined(FI_XPU_I_COOP_ALIGNED16) && (defined(__GNUC__) || defined(__CUDACC__))
#define FI_XPU_I_COOP_ALIGNED16(p) __builtin_assume_aligned(p, 16)
#endif
#ifndef FI_XPU_I_COOP_ALIGNED16
#define FI_XPU_I_COOP_ALIGNED16(p) ((void *)(p))
#endif

/*
 * Lane `rank` of `size`'s share of `words` 16-byte units, interleaved:
 * four units in flight per lane (all four loaded before the first is
 * stored), so a lane waits for memory once per four units, not once per
 * unit; then the units left over one at a time.
 */
FI_XPU_FUNC void fi_xpu_i_coop_copy16(unsigned char *d, const unsigned char *s, size_t words,
				      size_t rank, size_t size)
{
	size_t i = rank;

	for (; words >= 3 * size && i < words - 3 * size; i += 4 * size) {
		struct fi_xpu_i_coop_v16 a, b, c, e;
		FI_XPU_ARCH_MEMCPY(&a, FI_XPU_I_COOP_ALIGNED16(s + i * 16), 16);
		FI_XPU_ARCH_MEMCPY(&b, FI_XPU_I_COOP_ALIGNED16(s + (i + size) * 16), 16);
		FI_XPU_ARCH_MEMCPY(&c, FI_XPU_I_COOP_ALIGNED16(s + (i + 2 * size) * 16), 16);
		FI_XPU_ARCH_MEMCPY(&e, FI_XPU_I_COOP_ALIGNED16(s + (i + 3 * size) * 16), 16);
		FI_XPU_ARCH_MEMCPY(FI_XPU_I_COOP_ALIGNED16(d + i * 16), &a, 16);
		FI_XPU_ARCH_MEMCPY(FI_XPU_I_COOP_ALIGNED16(d + (i + size) * 16), &b, 16);
		FI_XPU_ARCH_MEMCPY(FI_XPU_I_COOP_ALIGNED16(d + (i + 2 * size) * 16), &c, 16);
		FI_XPU_ARCH_MEMCPY(FI_XPU_I_COOP_ALIGNED16(d + (i + 3 * size) * 16), &e, 16);
	}
	for (; i < words; i += size) {
		struct fi_xpu_i_coop_v16 v;
		FI_XPU_ARCH_MEMCPY(&v, FI_XPU_I_COOP_ALIGNED16(s + i * 16), 16);
		FI_XPU_ARCH_MEMCPY(FI_XPU_I_COOP_ALIGNED16(d + i * 16), &v, 16);
	}
}

#ifdef FI_XPU_I_ARCH_HAVE_GLOBAL16
/* The same between global buffers on NVIDIA: the source read with
 * ld.global.L1::no_allocate (fi_xpu/device_arch.h). */
FI_XPU_FUNC void fi_xpu_i_coop_copy16_global(unsigned char *d, const unsigned char *s,
					     size_t words, size_t rank, size_t size)
{
	size_t i = rank;

	for (; words >= 3 * size && i < words - 3 * size; i += 4 * size) {
		uint64_t a[2], b[2], c[2], e[2];
		fi_xpu_arch_ld16_stream(a, s + i * 16);
		fi_xpu_arch_ld16_stream(b, s + (i + size) * 16);
		fi_xpu_arch_ld16_stream(c, s + (i + 2 * size) * 16);
		fi_xpu_arch_ld16_stream(e, s + (i + 3 * size) * 16);
		fi_xpu_arch_st16_global(d + i * 16, a);
		fi_xpu_arch_st16_global(d + (i + size) * 16, b);
		fi_xpu_arch_st16_global(d + (i + 2 * size) * 16, c);
		fi_xpu_arch_st16_global(d + (i + 3 * size) * 16, e);
	}
	for (; i < words; i += size) {
		uint64_t v[2];
		fi_xpu_arch_ld16_stream(v, s + i * 16);
		fi_xpu_arch_st16_global(d + i * 16, v);
	}
}
#endif

/*
 * Lane `rank` of `size`'s share of an interleaved copy, the GPU form of a
 * cooperative copy: lanes take consecutive units in turn, so a subgroup's
 * accesses coalesce. The unit is the widest both sides allow: when source
 * and destination are equally aligned modulo 16 (modulo 8), the bytes up
 * to the destination's first 16-byte (8-byte) boundary are shared out
 * bytewise, then 16-byte (8-byte) words, then the tail bytewise; otherwise
 * bytes throughout. Compiled for every target, so the host tests run it
 * lane by lane for every alignment and length (tests/coop_copy.rs).
 */
FI_XPU_FUNC void fi_xpu_i_coop_copy_lanes(unsigned char *d, const unsigned char *s, size_t len,
					  size_t rank, size_t size)
{
	uintptr_t skew = (uintptr_t)d ^ (uintptr_t)s;
	size_t unit = (skew & 15u) == 0 ? 16 : (skew & 7u) == 0 ? 8 : 1;
	size_t head = (size_t)(-(uintptr_t)d & (uintptr_t)(unit - 1)), words, i;

	if (head > len)
		head = len;
	/* Bytes alone (unit 1) are all tail. */
	words = unit > 1 ? (len - head) / unit : 0;
	for (i = rank; i < head; i += size)
		d[i] = s[i];
	d += head;
	s += head;
	if (unit == 16) {
#ifdef FI_XPU_I_ARCH_HAVE_GLOBAL16
		if (fi_xpu_arch_global2(d, s))
			fi_xpu_i_coop_copy16_global(d, s, words, rank, size);
		else
#endif
			fi_xpu_i_coop_copy16(d, s, words, rank, size);
	} else if (unit == 8) {
		for (i = rank; i < words; i += size) {
			uint64_t w;
			FI_XPU_ARCH_MEMCPY(&w, s + i * 8, 8);
			FI_XPU_ARCH_MEMCPY(d + i * 8, &w, 8);
		}
	}
	for (i = words * unit + rank; i < len - head; i += size)
		d[i] = s[i];
}

FI_XPU_FUNC void fi_xpu_i_coop_copy_share(unsigned char *d, const unsigned char *s, size_t len,
					 size_t rank, size_t size)
{
#if defined(FI_XPU_ARCH_HOST)
	/* CPU threads: each takes one contiguous, cache-line-aligned chunk and
	 * copies it with the C library's memcpy (non-temporal stores for large
	 * transfers, see fi_xpu_arch_bulk_copy); interleaving words only pays
	 * on GPUs, where lanes coalesce. */
	size_t chunk = ((len + size - 1) / size + 63) & ~(size_t)63;
	size_t start = rank * chunk;

	if (start < len)
		fi_xpu_arch_bulk_copy(d + start, s + start, len - start < chunk ? len - start : chunk,
				      len);
#else
	fi_xpu_i_coop_copy_lanes(d, s, len, rank, size);
#endif
}

FI_XPU_FUNC int fi_xpu_coop_copy(void *dst, const void *src, size_t len, int scope, int mscope)
{
	int ret = fi_xpu_arch_scope_check(scope);

	if (ret)
		return ret;
	fi_xpu_i_coop_copy_share((unsigned char *)dst, (const unsigned char *)src, len,
				fi_xpu_arch_scope_rank(scope), fi_xpu_arch_scope_size(scope));
	fi_xpu_arch_fence(FI_XPU_ARCH_RELEASE, mscope);
	return fi_xpu_arch_barrier(scope);
}

/* The one place the shares of a split transfer are computed. */
FI_XPU_FUNC int fi_xpu_coop_part(size_t len, uint32_t part, uint32_t parts, size_t *off,
				 size_t *n)
{
	size_t units = len / 16 + (len % 16 != 0), q, r, first, end;

	if (part >= parts)
		return -FI_EINVAL;
	q = units / parts;
	r = units % parts;
	first = (size_t)part * q + (part < r ? part : r);
	end = first + q + (part < r);
	/* In bytes: the last unit may be short, and a unit index past it
	 * stands for the end. */
	*off = first < units ? first * 16 : len;
	*n = (end < units ? end * 16 : len) - *off;
	return 0;
}

FI_XPU_FUNC int fi_xpu_coop_broadcast_int(int scope, int value)
{
	uint64_t v = (uint64_t)(int64_t)value;
	int ret = fi_xpu_arch_broadcast_u64(scope, &v);

	return ret ? ret : (int)(int64_t)v;
}

/* ---- two-word counters --------------------------------------------------
 * A counter kept as two 64-bit words, {value, errors}, in memory visible at
 * `mscope` (the layout of the in-tree providers). `err` selects the error
 * word. A counter may have a second pair `r` (NULL: none) that other
 * agents increment, e.g. peers' remote events in memory they map, while the
 * owner's events update `c`: the counter is then the sum of the two (each
 * read once, wrapping), a set stores the value less `r`'s word into `c`
 * (so a read right after returns it; events landing in `r` meanwhile may
 * be missed), and an add goes to `c`.
 * These follow the scope meaning of fi_xpu/device_group.h, not the
 * "same arguments, one result" rule of the helpers above: reads are made by
 * every work item on its own (they return the word, or a negative code cast
 * to uint64_t); updates are operations, so every member applies its own
 * value (sixteen lanes adding 1 add 16) before the group leaves together;
 * a wait has one shared destination, so the leader waits and every member
 * gets its status. */

/* Word `i` (0: value, 1: errors) of the counter {c, r}, read as a poll
 * (FI_XPU_ARCH_POLL: relaxed on GPUs). Whoever acts on what it saw fences with acquire order once. */
FI_XPU_FUNC uint64_t fi_xpu_coop_cntr_poll(const uint64_t *c, const uint64_t *r, int i,
					   int mscope)
{
	uint64_t v = fi_xpu_arch_load_u64(c + i, FI_XPU_ARCH_POLL, mscope);
	return r ? v + fi_xpu_arch_load_u64(r + i, FI_XPU_ARCH_POLL, mscope) : v;
}

/* The same with acquire order: the relaxed reads, then one fence. */
FI_XPU_FUNC uint64_t fi_xpu_coop_cntr_word(const uint64_t *c, const uint64_t *r, int i,
					   int mscope)
{
	uint64_t v = fi_xpu_coop_cntr_poll(c, r, i, mscope);
	fi_xpu_arch_fence(FI_XPU_ARCH_ACQUIRE, mscope);
	return v;
}

FI_XPU_FUNC uint64_t fi_xpu_coop_cntr_read(const uint64_t *c, const uint64_t *r, int err,
					   int scope, int mscope)
{
	int ret = fi_xpu_arch_scope_check(scope);

	if (!ret && !c)
		ret = -FI_EINVAL;
	if (ret)
		return (uint64_t)(int64_t)ret;
	return fi_xpu_coop_cntr_word(c, r, err ? 1 : 0, mscope);
}

FI_XPU_FUNC int fi_xpu_coop_cntr_update(uint64_t *c, const uint64_t *r, int err, int set,
					uint64_t v, int scope, int mscope)
{
	struct fi_xpu_group g;
	int ret = fi_xpu_group_enter(&g, scope,
				     set ? (err ? "fi_xpu_cntr_seterr" : "fi_xpu_cntr_set")
					 : (err ? "fi_xpu_cntr_adderr" : "fi_xpu_cntr_add"));

	if (ret)
		return ret;
	if (!c)
		return -FI_EINVAL;
	if (set && r)
		v -= fi_xpu_arch_load_u64(r + (err ? 1 : 0), FI_XPU_ARCH_ACQUIRE, mscope);
	if (set)
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_arch_store_u64(c + (err ? 1 : 0), v,
									  FI_XPU_ARCH_RELEASE, mscope));
	else
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR,
				 (void)fi_xpu_arch_fetch_add_u64(c + (err ? 1 : 0), v,
								 FI_XPU_ARCH_ACQ_REL, mscope));
	return fi_xpu_group_leave(&g, 0);
}

/* 0 once the value reaches `threshold`; -FI_EAVAIL when the error word
 * moved meanwhile; -FI_ETIMEDOUT after `timeout_ms` (negative: no limit);
 * -FI_ECANCELED once the abort word at `abort` (0: none) is raised. */
FI_XPU_FUNC int fi_xpu_coop_cntr_wait_item(const uint64_t *c, const uint64_t *r, uint64_t abort,
					   uint64_t threshold, int timeout_ms, int mscope)
{
	uint64_t err0, start = fi_xpu_arch_clock_ns(), next = 0;

	if (!c)
		return -FI_EINVAL;
	err0 = fi_xpu_coop_cntr_poll(c, r, 1, mscope);
	/* Relaxed looks; one acquire fence once the value or the errors
	 * moved, so the turns that find nothing invalidate no cache. */
	for (;;) {
		int rc;
		if (fi_xpu_coop_cntr_poll(c, r, 0, mscope) >= threshold) {
			fi_xpu_arch_fence(FI_XPU_ARCH_ACQUIRE, mscope);
			return 0;
		}
		if (fi_xpu_coop_cntr_poll(c, r, 1, mscope) != err0) {
			fi_xpu_arch_fence(FI_XPU_ARCH_ACQUIRE, mscope);
			return -FI_EAVAIL;
		}
		rc = fi_xpu_i_wait_turn(abort, start, timeout_ms, &next);
		if (rc)
			return rc;
	}
}

FI_XPU_FUNC int fi_xpu_coop_cntr_wait(const uint64_t *c, const uint64_t *r, uint64_t abort,
				      uint64_t threshold, int timeout_ms, int scope, int mscope)
{
	struct fi_xpu_group g;
	int ret = fi_xpu_group_enter(&g, scope, "fi_xpu_cntr_wait");

	if (ret)
		return ret;
	if (fi_xpu_group_leader(&g))
		ret = fi_xpu_coop_cntr_wait_item(c, r, abort, threshold, timeout_ms, mscope);
	/* The share is a group barrier with acquire order, so what the
	 * leader's wait observed is visible to every member after it. */
	return (int)fi_xpu_group_share(&g, ret);
}

#endif /* FI_XPU_INCLUDED_DEVICE_COOP_H */
