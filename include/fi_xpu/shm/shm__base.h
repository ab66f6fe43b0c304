/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: the protocol words that only device code
 * knows (message slot states, flow stamps), the loads and stores of shared
 * words, the copy, and the stamps that say who sent an entry.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_BASE_H
#define FI_XPU_INCLUDED_SHM_SHM_BASE_H

#include <fi_xpu/device_arch.h>
#include <fi_xpu/device_coop.h>
#include <fi_xpu/device_handle.h>
#include <fi_xpu/device_group.h>
#include <fi_xpu/device_check.h>
#include <fi_xpu/shm/shm__types.h>

/* The private copy of an arrived message's header that matching and
 * delivery use (fi_xpu_shm_msg_read); `src_nonce` is the source the
 * receiver attributed it to. */
struct fi_xpu_shm_msg_seen {
	uint64_t seq, state, len, tag, data, flags;
	uint64_t src_nonce, src_ep, src_conn, src_region, src_off, src_gen, stamp, pstamp;
};

/* Payload bytes of an eager message: a slot less its header. */
#define FI_XPU_SHM_EAGER_MAX (FI_XPU_SHM_SLOT_SIZE - FI_XPU_SHM_MSG_HDR)
/* Message slot states and internal flags. */
#define FI_XPU_SHM_SLOT_NEW 0
#define FI_XPU_SHM_SLOT_CONSUMED 1
#define FI_XPU_SHM_SLOT_RDV_DONE 2
#define FI_XPU_SHM_SLOT_RDV_FAILED 3
#define FI_XPU_SHM_SLOT_STREAMING 4
#define FI_XPU_SHM_MSG_RDV (1ULL << 62)
#define FI_XPU_SHM_MSG_STREAM (1ULL << 61)
#define FI_XPU_SHM_POSTED_FREE 0
#define FI_XPU_SHM_POSTED_READY 1
#define FI_XPU_SHM_POSTED_ACTIVE 2
#define FI_XPU_SHM_POSTED_DIRECTED (1ULL << 61)
#define FI_XPU_SHM_RDV_REG 1
#define FI_XPU_SHM_RDV_STREAM 2
#define FI_XPU_SHM_RDV_STAGED 3
#define FI_XPU_SHM_PEER_BLOCK                                          \
	(sizeof(struct fi_xpu_shm_ep_block) +                           \
	 (uint64_t)FI_XPU_SHM_INBOX_SLOTS * FI_XPU_SHM_SLOT_SIZE)
/* What a flow stamp says about its value (fi_xpu_shm_flow_stamp). */
#define FI_XPU_SHM_FLOW_PRODUCED 1
#define FI_XPU_SHM_FLOW_CONSUMED 2
#define FI_XPU_SHM_FLOW_FAILED 3

/* ---- small helpers ----------------------------------------------------- */
#define FI_XPU_SHM_P(T, v) ((T *)(uintptr_t)(v))
#define FI_XPU_SHM_SYS FI_XPU_ARCH_MS_SYSTEM

FI_XPU_FUNC uint64_t fi_xpu_shm_ld(const uint64_t *p)
{
	return fi_xpu_arch_load_u64(p, FI_XPU_ARCH_ACQUIRE, FI_XPU_SHM_SYS);
}
FI_XPU_FUNC uint64_t fi_xpu_shm_ldr(const uint64_t *p)
{
	return fi_xpu_arch_load_u64(p, FI_XPU_ARCH_RELAXED, FI_XPU_SHM_SYS);
}
FI_XPU_FUNC void fi_xpu_shm_st(uint64_t *p, uint64_t v)
{
	fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELEASE, FI_XPU_SHM_SYS);
}
/* Polls read relaxed on GPUs (FI_XPU_ARCH_POLL: no cache invalidation on
 * the turns that find nothing); a poll that found something fences once
 * with acquire order before it reads what the word covers. */
FI_XPU_FUNC uint64_t fi_xpu_shm_poll(const uint64_t *p)
{
	return fi_xpu_arch_load_u64(p, FI_XPU_ARCH_POLL, FI_XPU_SHM_SYS);
}
FI_XPU_FUNC void fi_xpu_shm_acq(void)
{
	fi_xpu_arch_fence(FI_XPU_ARCH_ACQUIRE, FI_XPU_SHM_SYS);
}
FI_XPU_FUNC void fi_xpu_shm_str(uint64_t *p, uint64_t v)
{
	fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELAXED, FI_XPU_SHM_SYS);
}
/* The same at scope `ms` (FI_XPU_ARCH_MS_*), for the words of an object
 * whose scope the host chose (fi_xpu_shm(7), MEMORY PLACEMENT). */
FI_XPU_FUNC uint64_t fi_xpu_shm_ld_at(const uint64_t *p, int ms)
{
	return fi_xpu_arch_load_u64(p, FI_XPU_ARCH_ACQUIRE, ms);
}
FI_XPU_FUNC void fi_xpu_shm_st_at(uint64_t *p, uint64_t v, int ms)
{
	fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELEASE, ms);
}
FI_XPU_FUNC int fi_xpu_shm_cas_at(uint64_t *p, uint64_t expected, uint64_t desired, int ms)
{
	return fi_xpu_arch_cas_u64(p, expected, desired, FI_XPU_ARCH_ACQ_REL, ms) == expected;
}
/* The FI_XPU_ARCH_MS_* scope a scope word names: device scope only for
 * FI_XPU_SHM_SCOPE_DEV, whatever else a word holds. Built with
 * FI_XPU_I_SHM_SCOPE (tests of the generated code), that scope instead. */
#ifdef FI_XPU_I_SHM_SCOPE
#define FI_XPU_SHM_MS(word) ((void)(word), FI_XPU_I_SHM_SCOPE)
#else
#define FI_XPU_SHM_MS(word)                                                    \
	((word) == FI_XPU_SHM_SCOPE_DEV ? FI_XPU_ARCH_MS_DEVICE : FI_XPU_ARCH_MS_SYSTEM)
#endif
FI_XPU_FUNC int fi_xpu_shm_cas(uint64_t *p, uint64_t expected, uint64_t desired)
{
	return fi_xpu_arch_cas_u64(p, expected, desired, FI_XPU_ARCH_ACQ_REL, FI_XPU_SHM_SYS) ==
	       expected;
}
FI_XPU_FUNC void fi_xpu_shm_add(uint64_t *p, uint64_t v)
{
	if (p)
		fi_xpu_arch_fetch_add_u64(p, v, FI_XPU_ARCH_ACQ_REL, FI_XPU_SHM_SYS);
}

/* Rings a context heap's bell (fi_xpu_shm_heap_hdr.bell; NULL: none), at
 * scope `ms`, once an event that may leave one of its CQs non-empty is
 * published: an entry or overflow of a CQ ring, a message in an inbox, an
 * endpoint turned busy. Release: a poll that sees the new count sees the
 * event. */
FI_XPU_FUNC void fi_xpu_shm_ring_bell(uint64_t *bell, int ms)
{
	if (bell)
		fi_xpu_arch_fetch_add_u64(bell, 1, FI_XPU_ARCH_ACQ_REL, ms);
}

/* Copies [lo, hi) of a buffer of `len` bytes split among `nranks`
 * callers, word-wise where both sides allow it; no libc. */
FI_XPU_FUNC void fi_xpu_shm_copy_part(void *dst, const void *src, size_t len, uint32_t rank,
				      uint32_t nranks)
{
	unsigned char *d = (unsigned char *)dst;
	const unsigned char *s = (const unsigned char *)src;
	size_t chunk, lo, hi, i;
	if (nranks == 0)
		nranks = 1;
	chunk = (len + nranks - 1) / nranks;
	chunk = (chunk + 63) & ~(size_t)63;
	lo = (size_t)rank * chunk;
	if (lo >= len)
		return;
	hi = lo + chunk < len ? lo + chunk : len;
	i = lo;
	if ((((uintptr_t)(d + i)) & 7) == 0 && (((uintptr_t)(s + i)) & 7) == 0) {
		for (; i + 8 <= hi; i += 8)
			*(uint64_t *)(void *)(d + i) = *(const uint64_t *)(const void *)(s + i);
	}
	for (; i < hi; i++)
		d[i] = s[i];
}

FI_XPU_FUNC void fi_xpu_shm_copy(void *dst, const void *src, size_t len)
{
	fi_xpu_shm_copy_part(dst, src, len, 0, 1);
}

/* ---- stamps ------------------------------------------------------------- */
/* Every peer can write a receiver's inbox and its remote-completion rings,
 * so nothing a peer writes there can say who sent an entry. Instead, each
 * connection has a 128-bit key that the receiver drew and handed to that
 * peer alone, over the authenticated control socket; the sender stamps
 * each entry with SipHash-1-3 under it, over the entry's position (never
 * reused), the ring or endpoint it went to, and what says where its data
 * is. The receiver recomputes the stamp with the key of the connection
 * the entry names, from its own private map: an entry passes only if that
 * connection's peer made it for that very place, and its source is then
 * the peer that connection attested, whatever the entry says. */
#define FI_XPU_SHM_ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define FI_XPU_SHM_SIPROUND(v0, v1, v2, v3)                                             \
	do {                                                                           \
		v0 += v1; v1 = FI_XPU_SHM_ROTL(v1, 13); v1 ^= v0; v0 = FI_XPU_SHM_ROTL(v0, 32); \
		v2 += v3; v3 = FI_XPU_SHM_ROTL(v3, 16); v3 ^= v2;                      \
		v0 += v3; v3 = FI_XPU_SHM_ROTL(v3, 21); v3 ^= v0;                      \
		v2 += v1; v1 = FI_XPU_SHM_ROTL(v1, 17); v1 ^= v2; v2 = FI_XPU_SHM_ROTL(v2, 32); \
	} while (0)

/* SipHash-1-3 of the `n` words `w` (as 8n little-endian bytes) under
 * `key`. */
FI_XPU_FUNC uint64_t fi_xpu_shm_stamp(const uint64_t *key, const uint64_t *w, int n)
{
	uint64_t k0 = key[0], k1 = key[1], b = (uint64_t)(8 * n) << 56;
	uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
	int i;
	for (i = 0; i < n; i++) {
		v3 ^= w[i];
		FI_XPU_SHM_SIPROUND(v0, v1, v2, v3);
		v0 ^= w[i];
	}
	v3 ^= b;
	FI_XPU_SHM_SIPROUND(v0, v1, v2, v3);
	v0 ^= b;
	v2 ^= 0xff;
	FI_XPU_SHM_SIPROUND(v0, v1, v2, v3);
	FI_XPU_SHM_SIPROUND(v0, v1, v2, v3);
	FI_XPU_SHM_SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

/* What a message stamp covers, besides the key: where the entry is and
 * everything its receiver acts on. */
struct fi_xpu_shm_msg_id {
	uint64_t pos, ep_id, src_ep, flags, len, tag, data, src_region, src_off;
};

/* The stamp of an inbox entry at position `pos` of endpoint `ep_id` from
 * endpoint `src_ep` (both ids below 2^32), over its flags, length, tag
 * and CQ data. A rendezvous or streamed message names memory of its
 * sender to read, which the stamp covers too; an eager message's bytes
 * have a stamp of their own (fi_xpu_shm_bytes_stamp). */
FI_XPU_FUNC uint64_t fi_xpu_shm_msg_stamp(const uint64_t *key, const struct fi_xpu_shm_msg_id *id)
{
	uint64_t w[8];
	w[0] = id->pos;
	w[1] = (id->ep_id & 0xffffffffULL) | (id->src_ep << 32);
	w[2] = id->flags;
	w[3] = id->len;
	w[4] = id->tag;
	w[5] = id->data;
	w[6] = id->src_region;
	w[7] = id->src_off;
	return fi_xpu_shm_stamp(key, w,
				(id->flags & (FI_XPU_SHM_MSG_RDV | FI_XPU_SHM_MSG_STREAM)) ? 8 : 6);
}

/* The little-endian word of the 8 bytes at `p`, at any alignment (one
 * load where the target has unaligned loads). */
FI_XPU_FUNC uint64_t fi_xpu_shm_le64(const unsigned char *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
	       (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
	       (uint64_t)p[7] << 56;
}

/* The stamp of the `len` bytes of an eager message at inbox position
 * `pos`: SipHash-1-3 of the position, then the bytes (the last word
 * zero-padded), under the connection's key. Byte i is read from `a` below
 * `na`, from `b` above. The bytes sit in the slot, where any peer may
 * overwrite them: the receiver stamps again what it copied out (`a`, the
 * slot `b` for the truncated rest), so a change between the sender and
 * that copy is seen. */
FI_XPU_FUNC uint64_t fi_xpu_shm_bytes_stamp(const uint64_t *key, uint64_t pos, const void *a,
					    uint64_t na, const void *b, uint64_t len)
{
	const unsigned char *pa = (const unsigned char *)a, *pb = (const unsigned char *)b;
	uint64_t k0 = key[0], k1 = key[1], fin = len << 56;
	uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
	uint64_t i, j, w = pos;
	for (i = 0;; i += 8) {
		v3 ^= w;
		FI_XPU_SHM_SIPROUND(v0, v1, v2, v3);
		v0 ^= w;
		if (i >= len)
			break;
		if (i + 8 <= len && i + 8 <= na) {
			w = fi_xpu_shm_le64(pa + i);
		} else if (i + 8 <= len && i >= na) {
			w = fi_xpu_shm_le64(pb + i);
		} else {
			w = 0;
			for (j = 0; j < 8 && i + j < len; j++)
				w |= (uint64_t)(i + j < na ? pa[i + j] : pb[i + j]) << (8 * j);
		}
	}
	v3 ^= fin;
	FI_XPU_SHM_SIPROUND(v0, v1, v2, v3);
	v0 ^= fin;
	v2 ^= 0xff;
	FI_XPU_SHM_SIPROUND(v0, v1, v2, v3);
	FI_XPU_SHM_SIPROUND(v0, v1, v2, v3);
	FI_XPU_SHM_SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

/* The stamp of a remote completion at position `pos` of the ring at heap
 * offset `roff`. */
FI_XPU_FUNC uint64_t fi_xpu_shm_cqe_stamp(const uint64_t *key, uint64_t pos, uint64_t roff,
					  uint64_t src_ep, uint64_t len, uint64_t data)
{
	uint64_t w[4];
	w[0] = pos;
	w[1] = roff;
	w[2] = src_ep | (len << 32);
	w[3] = data;
	return fi_xpu_shm_stamp(key, w, 4);
}

/* The stamp of a flow-control word of the rendezvous or streamed message
 * at inbox position `pos` of endpoint `rep`: `value` produced bytes
 * (written by the sender), consumed bytes or a failure (written by the
 * receiver), as `kind` says. The words lie in the inbox slot, which every
 * peer of the receiver can write; both ends hold the connection's key,
 * so each acts only on the other's stamped word, and a third peer can
 * stall a transfer but never make the sender reuse a lane or a buffer
 * early or the receiver take bytes that were not staged. Five words: no
 * other stamp has that length. */
FI_XPU_FUNC uint64_t fi_xpu_shm_flow_stamp(const uint64_t *key, uint64_t pos, uint64_t rep,
					   uint64_t value, uint64_t kind)
{
	uint64_t w[5];
	w[0] = pos;
	w[1] = rep;
	w[2] = value;
	w[3] = kind;
	w[4] = 0x776f6c66ULL; /* "flow" */
	return fi_xpu_shm_stamp(key, w, 5);
}

/* Publishes a flow-control word of a slot and its stamp word `sw`: the
 * value first, then the stamp, both with release, so that bytes and
 * reads before them are done and visible to whoever reads the pair.
 * Returns the stamp. */
FI_XPU_FUNC uint64_t fi_xpu_shm_flow_put(uint64_t *word, uint64_t *sw, const uint64_t *key,
					 uint64_t pos, uint64_t rep, uint64_t value, uint64_t kind)
{
	uint64_t st = fi_xpu_shm_flow_stamp(key, pos, rep, value, kind);
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(word, value));
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(sw, st));
	return st;
}

#endif /* FI_XPU_INCLUDED_SHM_SHM_BASE_H */
