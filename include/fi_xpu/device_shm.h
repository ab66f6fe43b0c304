/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: every data-path operation of
 * <fi_xpu/device.h> for endpoints, CQs and counters of the shm provider
 * (prov_id FI_XPU_PROV_SHM). The caller's device moves the data itself
 * through the peer's memory, which the host side mapped into this context
 * (see fi_xpu_shm(7)).
 *
 * Header-only, no libc on device paths; written against
 * <fi_xpu/device_arch.h> (atomics with a memory scope, barriers,
 * broadcast, clock). Every access to memory another process can change uses
 * atomics or is bounded by values this process checked; atomics and fences
 * are system-scope, except what is written into a peer the host found on
 * this GPU (fi_xpu_shm_peer_addr.scope, fi_xpu_shm(7) MEMORY PLACEMENT).
 *
 * Raw handles:
 *   dest_addr  points to the 8 bytes fi_xpu_av_lookup wrote (a pointer to
 *              the context's record of that peer).
 *   desc       points to the 32 bytes fi_xpu_mr_desc wrote, or is NULL.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_SHM_H
#define FI_XPU_INCLUDED_DEVICE_SHM_H

#include <fi_xpu/device_arch.h>
#include <fi_xpu/device_coop.h>
#include <fi_xpu/device_handle.h>
#include <fi_xpu/device_group.h>
#include <fi_xpu/device_check.h>

#ifndef FI_XPU_DEVICE_ID_shm
#define FI_XPU_DEVICE_ID_shm FI_XPU_PROV_SHM
#endif

/* ---- shared layouts (twins of providers/shm/src/layout.rs) ----------- */
#define FI_XPU_SHM_MAX_REGIONS 256
#define FI_XPU_SHM_MAX_CONNS 64
#define FI_XPU_SHM_MAX_POSTED 64
#define FI_XPU_SHM_MAX_PROGRESS 8
#define FI_XPU_SHM_PEER_ALIVE 1
#define FI_XPU_SHM_PEER_ADDRS 1024
#define FI_XPU_SHM_RESOLVE_SLOTS 256
#define FI_XPU_SHM_EP_MAGIC 0x6669787075657062ULL
#define FI_XPU_SHM_CQ_HDR 192
#define FI_XPU_SHM_MSG_HDR 128
#define FI_XPU_SHM_INBOX_SLOTS 64
#define FI_XPU_SHM_SLOT_SIZE 4096
#define FI_XPU_SHM_EAGER_MAX (FI_XPU_SHM_SLOT_SIZE - FI_XPU_SHM_MSG_HDR)
#define FI_XPU_SHM_STAGE_LANES 4
#define FI_XPU_SHM_STAGE_LANE_SIZE 65536

/* A registration table's header, and a context heap's (offset 0): there,
 * `bell` counts the events that may leave one of the context's CQs
 * non-empty (fi_xpu_shm_ring_bell). */
struct fi_xpu_shm_heap_hdr {
	uint64_t magic, size, mr_off, mr_slots, bell, pad[3];
};
struct fi_xpu_shm_mr_entry {
	uint64_t gen, base, len, access, region, key, pad[2];
};
struct fi_xpu_shm_cq_ring {
	uint64_t head, p0[7];
	uint64_t tail, p1[7];
	uint64_t size, format, overflow, overflow_seen, p2[4];
};
struct fi_xpu_shm_cqe {
	uint64_t seq, flags, context, len, buf, data, tag;
	int64_t err;
	uint64_t olen, src_nonce, src_ep, is_err;
	/* Remote-completion rings: the connection the receiver attributes the
	 * entry to, and the sender's stamp over it (fi_xpu_shm_stamp). */
	uint64_t src_conn, stamp;
};
struct fi_xpu_shm_cntr {
	uint64_t value, err, magic, pad[5];
};
/* What peers need to deliver to an endpoint, in its context's table
 * region, which they map read-only: heap offsets (0: none) of the ring
 * that takes its remote completions and of its remote counters, the
 * heap's region and the heap offset of its block. */
struct fi_xpu_shm_ep_info {
	uint64_t magic, nonce, ep_id, caps;
	uint64_t rx_cq, rem_write_cntr, rem_read_cntr, heap_region, block_off;
	uint64_t device[3]; /* the context's device: iface and UUID (0: host) */
	uint64_t pad[4];
};
/* An endpoint's inbox in the heap: head (senders claim slots by moving
 * it) and tail (its owner retires slots); the slots follow. */
struct fi_xpu_shm_ep_block {
	uint64_t head, p1[7];
	uint64_t tail, p2[7];
};
struct fi_xpu_shm_peer_map {
	uint64_t state, gen;
	uint64_t base[FI_XPU_SHM_MAX_REGIONS];
	uint64_t size[FI_XPU_SHM_MAX_REGIONS];
	/* The peer's domain nonce as this domain attested it (0: not
	 * attested), and the key it gave the peer for this connection; the
	 * same of the generation before, whose entries may still wait. */
	uint64_t nonce, key[2];
	uint64_t prev_gen, prev_nonce, prev_key[2];
	/* Regions mapped read-only (bit rid % 64 of word rid / 64): never
	 * written through. */
	uint64_t ro[FI_XPU_SHM_MAX_REGIONS / 64];
	/* Moves (release, by the host) after every change that can make a
	 * resolution through this map stale: a region withdrawn, the peer
	 * gone, its id given to another peer (fi_xpu_shm_resolve_ent). */
	uint64_t epoch;
};
struct fi_xpu_shm_peer_addr {
	uint64_t map, info_region, info_off, nonce, ep_id, conn_at_peer, conn_gen, map_gen;
	uint64_t key[2]; /* the peer's key for our connection: stamps our sends */
	/* The memory scope of what this process writes into that peer (data,
	 * inbox slots, signal words): FI_XPU_SHM_SCOPE_DEV when the host found
	 * both contexts on one device, with their heaps in its memory;
	 * anything else is system scope. */
	uint64_t scope;
};
struct fi_xpu_shm_ctx_dev {
	uint64_t heap_base, heap_region, nonce;
	uint64_t peer_addrs; /* table of FI_XPU_SHM_PEER_ADDRS raw addresses */
	uint64_t maps[FI_XPU_SHM_MAX_CONNS];
	uint64_t abort; /* the context's abort word, fi_xpu/device_handle.h */
	/* The resolve table: FI_XPU_SHM_RESOLVE_SLOTS entries in memory only
	 * the context's kernels touch (device memory on a device context). */
	uint64_t resolve;
};
/* What an RMA to (raw peer address, key) resolved to, written by device
 * code under `seq` (odd while a writer fills it; even and non-zero once
 * complete), so that the next one to the same pair checks only what can
 * change: the peer map's epoch and the registration's generation word
 * (`genp`, in the peer's table; the key's low 32 bits are the value it
 * must hold). The raw address's record as it was, the registration's
 * base and length as checked, where its base is mapped here (`mem`), the
 * accesses checked, and the peer endpoint's information and heap. */
struct fi_xpu_shm_resolve_ent {
	uint64_t seq, pa, map, map_gen, info_region, info_off, key, epoch;
	uint64_t genp, mem, base, len, access, heap, heap_size, info;
};
/* A posted receive. Matched to a streamed message it stays ACTIVE, with
 * the message's length, tag, data and source copied in, until the last
 * byte arrived; `map` is the sender's peer map, checked for liveness. */
struct fi_xpu_shm_posted {
	uint64_t state, buf, len, tag, ignore, context, flags, seq;
	uint64_t slot, src_nonce, src_ep, mlen, done, stage, data, map;
	/* Streamed: the message's inbox position, and the stamp of the
	 * consumed position last published (fi_xpu_shm_flow_stamp). */
	uint64_t pos, cst;
};
/* An outstanding rendezvous (kind RDV) or streamed (STREAM, then STAGED
 * once every byte is in the lane and the send was reported) send; `map`
 * and `gen` name the receiver's connection, checked for liveness; `pos`
 * and `rep` the message's inbox position and endpoint there, `key` the
 * key of that connection, `acked` the last consumed position the receiver
 * stamped (fi_xpu_shm_flow_stamp): nothing else ends the send or lets a
 * lane be refilled. */
struct fi_xpu_shm_rdv {
	uint64_t slot, context, len, flags, buf, sent, lane, kind, map, gen;
	uint64_t pos, rep, key[2], acked;
	/* The receiver's stamp last accepted; the stamp of `sent` published. */
	uint64_t cseen, pst;
};
struct fi_xpu_shm_ep_dev {
	uint64_t block, ctx, nonce, ep_id, caps, tx_cq, rx_cq;
	uint64_t cntr[6];
	uint64_t av_tab, av_count, lock, post_seq, lanes;
	uint64_t magic; /* validity word, fi_xpu/device_handle.h */
	/* Testing only (FI_XPU_SHM_TEST_DELAY_US, fi_xpu_shm(7)): put-with-signal
	 * places its data late, last bytes first; 0 otherwise. */
	uint64_t test_delay_ns;
	/* Its staging lanes: where this process writes them, and the region
	 * (read-only to peers) and offset peers read them at. */
	uint64_t stage, stage_region, stage_off;
	/* Set (under the lock) when a rendezvous or streamed send starts or a
	 * posted receive turns ACTIVE; cleared by progress when it found
	 * neither. With the inbox empty and this clear, progress has nothing
	 * to do, and a CQ poll skips it without taking the lock. */
	uint64_t busy;
	struct fi_xpu_shm_posted posted[FI_XPU_SHM_MAX_POSTED];
	struct fi_xpu_shm_rdv rdv[FI_XPU_SHM_MAX_POSTED];
};
/* `ring` is private to the CQ's process; `rring` (0 until the CQ takes
 * remote events) is a ring of `size` entries in the shared heap that peers
 * push remote completions into, drained from `rtail` by readers. */
struct fi_xpu_shm_cq_dev {
	uint64_t ring, size, format;
	int64_t timeout_ms;
	uint64_t nprog;
	uint64_t prog[FI_XPU_SHM_MAX_PROGRESS];
	uint64_t rring, rtail, rseen;
	uint64_t magic; /* validity word, fi_xpu/device_handle.h */
	uint64_t abort; /* the context's abort word, fi_xpu/device_handle.h */
	uint64_t ctx;   /* the context's device root (peer maps); 0: host CQ */
	uint64_t roff;  /* heap offset of rring, which stamps name */
	/* The context heap's bell (0: host CQ), and its value when a read last
	 * found the CQ idle: while the two are equal, nothing happened since,
	 * and a poll reads these two words only. The host sets `bseen` to
	 * ~0 when what the CQ progresses changes and when it closes. */
	uint64_t bell, bseen;
};
/* A counter's device block (local). `cntr` is its {value, errors} block,
 * private to its process, which the owner's own events update; `rcntr` (0
 * until the counter is bound for remote events) is a second block, in the
 * shared heap, that peers' remote events increment. The counter is the
 * sum of the two. */
struct fi_xpu_shm_cntr_dev {
	uint64_t magic; /* validity word, fi_xpu/device_handle.h */
	uint64_t cntr, abort, rcntr, pad[4];
};
struct fi_xpu_shm_av_ent {
	uint64_t nonce, ep_id;
};
struct fi_xpu_shm_mr_desc {
	uint64_t region, base, len, key;
};
/* The private copy of an arrived message's header that matching and
 * delivery use (fi_xpu_shm_msg_read); `src_nonce` is the source the
 * receiver attributed it to. */
struct fi_xpu_shm_msg_seen {
	uint64_t seq, state, len, tag, data, flags;
	uint64_t src_nonce, src_ep, src_conn, src_region, src_off, src_gen, stamp, pstamp;
};
struct fi_xpu_shm_msg {
	uint64_t seq, state, len, tag, data, flags;
	uint64_t cstamp; /* the receiver's fi_xpu_shm_flow_stamp of consumed */
	uint64_t src_ep, src_conn, src_region, src_off;
	uint64_t produced, consumed, src_gen;
	uint64_t stamp;  /* fi_xpu_shm_msg_stamp under the key of src_conn */
	uint64_t pstamp; /* eager: fi_xpu_shm_bytes_stamp of the bytes;
			  * streamed: the sender's flow stamp of produced */
};

enum {
	FI_XPU_SHM_CNTR_SEND,
	FI_XPU_SHM_CNTR_RECV,
	FI_XPU_SHM_CNTR_READ,
	FI_XPU_SHM_CNTR_WRITE,
	FI_XPU_SHM_CNTR_REM_READ,
	FI_XPU_SHM_CNTR_REM_WRITE
};

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
/* Scope words of the shared layouts (fi_xpu_shm_peer_addr.scope): 0, what
 * a zeroed record says, is system scope. */
#define FI_XPU_SHM_SCOPE_SYS 0
#define FI_XPU_SHM_SCOPE_DEV 1

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

/* ---- completion queues ------------------------------------------------- */
struct fi_xpu_shm_cqe_in {
	uint64_t flags, context, len, buf, data, tag, olen, src_nonce, src_ep;
	int64_t err;
	/* Remote completions: stamped under `key` (non-NULL) for the ring at
	 * heap offset `roff` of the receiver, which knows us as `src_conn`. */
	const uint64_t *key;
	uint64_t src_conn, roff;
};

FI_XPU_FUNC struct fi_xpu_shm_cqe_in fi_xpu_shm_cqe_zero(void)
{
	struct fi_xpu_shm_cqe_in in;
	in.flags = in.context = in.len = in.buf = in.data = in.tag = 0;
	in.olen = in.src_nonce = in.src_ep = 0;
	in.err = 0;
	in.key = FI_XPU_I_NULL;
	in.src_conn = in.roff = 0;
	return in;
}

/* Entry `pos` of a ring of `size` entries (a power of two): the entries
 * follow the 192-byte header, so they are 8-byte aligned. */
FI_XPU_FUNC struct fi_xpu_shm_cqe *fi_xpu_shm_ring_entry(struct fi_xpu_shm_cq_ring *r, uint64_t size,
							  uint64_t pos)
{
	return (struct fi_xpu_shm_cqe *)(void *)((unsigned char *)r + FI_XPU_SHM_CQ_HDR) +
	       (pos & (size - 1));
}

/* Publishes `in` at position `h` of a ring of `size` entries, claimed. */
FI_XPU_FUNC void fi_xpu_shm_ring_fill(struct fi_xpu_shm_cq_ring *r, uint64_t size, uint64_t h,
				      const struct fi_xpu_shm_cqe_in *in)
{
	struct fi_xpu_shm_cqe *e = fi_xpu_shm_ring_entry(r, size, h);
	e->flags = in->flags;
	e->context = in->context;
	e->len = in->len;
	e->buf = in->buf;
	e->data = in->data;
	e->tag = in->tag;
	e->err = in->err;
	e->olen = in->olen;
	e->src_nonce = in->src_nonce;
	e->src_ep = in->src_ep;
	e->is_err = in->err != 0;
	e->src_conn = in->src_conn;
	e->stamp = in->key ? fi_xpu_shm_cqe_stamp(in->key, h, in->roff, in->src_ep, in->len, in->data)
			   : 0;
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, fi_xpu_shm_st(&e->seq, h + 1));
}

/* fi_xpu_shm_ring_put when the ring looked full or its head kept moving:
 * out of line, with every bounded retry. */
FI_XPU_NOINLINE_FUNC int fi_xpu_shm_ring_put_full(struct fi_xpu_shm_cq_ring *r, uint64_t size,
						  const struct fi_xpu_shm_cqe_in *in,
						  int count_overflow)
{
	uint64_t h, t;
	int moved = 0;
	for (;;) {
		/* The tail first: the head, read after it, is never behind
		 * it. Read the other way round, readers could take entries
		 * pushed after our head was read, and the ring would look
		 * full (h - t wraps) with room in it. */
		t = fi_xpu_shm_ld(&r->tail);
		h = fi_xpu_shm_ld(&r->head);
		if (h - t >= size) {
			/* Full unless a reader made room since (a few times
			 * at most: a peer that keeps moving the tail of a ring
			 * it can write gains nothing by it). */
			if (fi_xpu_shm_ld(&r->tail) != t && ++moved < 64)
				continue;
			/* Nobody waits for room: the loss is counted, and the
			 * reader reports it as an FI_EOVERRUN entry. */
			if (count_overflow)
				FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, fi_xpu_shm_add(&r->overflow, 1));
			return -FI_EAGAIN;
		}
		if (fi_xpu_shm_cas(&r->head, h, h + 1))
			break;
	}
	fi_xpu_shm_ring_fill(r, size, h, in);
	return 0;
}

/* Claims a slot of a ring with `size` entries (a power of two) and
 * publishes `in`; -FI_EAGAIN when the ring is full. One load, the tail
 * (acquire: the reader that moved it is done with the slots behind it);
 * the head is what the claim's compare-and-swap finds, first guessed
 * equal to the tail (an empty ring, the common case), never behind it.
 * A ring that looks full, or a head that keeps moving, takes the out of
 * line path above. */
FI_XPU_FUNC int fi_xpu_shm_ring_put(struct fi_xpu_shm_cq_ring *r, uint64_t size,
				    const struct fi_xpu_shm_cqe_in *in, int count_overflow)
{
	uint64_t t = fi_xpu_shm_ld(&r->tail), h = t, old;
	int n;
	for (n = 0; n < 4 && h - t < size; n++) {
		old = fi_xpu_arch_cas_u64(&r->head, h, h + 1, FI_XPU_ARCH_ACQ_REL, FI_XPU_SHM_SYS);
		if (old == h) {
			fi_xpu_shm_ring_fill(r, size, h, in);
			return 0;
		}
		h = old;
	}
	return fi_xpu_shm_ring_put_full(r, size, in, count_overflow);
}

FI_XPU_FUNC int fi_xpu_shm_ring_push(struct fi_xpu_shm_cq_ring *r, uint64_t size,
				     const struct fi_xpu_shm_cqe_in *in)
{
	return fi_xpu_shm_ring_put(r, size, in, 1);
}

/* Completions lost to a full ring since the last report become one error
 * entry (err FI_EOVERRUN, olen the number lost) as soon as there is room
 * for it, and rings `bell` (fi_xpu_shm_ring_bell). Run by the ring's reader. */
FI_XPU_FUNC void fi_xpu_shm_report_overrun_rung(struct fi_xpu_shm_cq_ring *r, uint64_t size,
						uint64_t *bell)
{
	/* What was reported first: the count, read after it, is never behind
	 * it. Read the other way round, another reader's report between the
	 * two reads would let this one move the reported count back, and
	 * report ov - seen wrapped (2^64 - 1 completions lost). */
	uint64_t seen = fi_xpu_shm_poll(&r->overflow_seen), ov = fi_xpu_shm_poll(&r->overflow);
	struct fi_xpu_shm_cqe_in in;
	if (ov == seen)
		return;
	fi_xpu_shm_acq();
	if (!fi_xpu_shm_cas(&r->overflow_seen, seen, ov))
		return;
	in = fi_xpu_shm_cqe_zero();
	in.err = -FI_EOVERRUN;
	in.olen = ov - seen;
	if (fi_xpu_shm_ring_put(r, size, &in, 0) != 0)
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, fi_xpu_shm_add(&r->overflow_seen, (uint64_t)0 - (ov - seen)));
	else
		fi_xpu_shm_ring_bell(bell, FI_XPU_SHM_SYS);
}

/* The same for a ring without a bell. */
FI_XPU_FUNC void fi_xpu_shm_report_overrun(struct fi_xpu_shm_cq_ring *r, uint64_t size)
{
	fi_xpu_shm_report_overrun_rung(r, size, FI_XPU_I_NULL);
}

/* The map (private to this process) of connection `conn` of the context
 * whose device root is `cx`; 0 when there is none. */
FI_XPU_FUNC const struct fi_xpu_shm_peer_map *fi_xpu_shm_conn_map(uint64_t cx, uint64_t conn)
{
	const struct fi_xpu_shm_ctx_dev *c = FI_XPU_SHM_P(const struct fi_xpu_shm_ctx_dev, cx);
	if (!c || conn >= FI_XPU_SHM_MAX_CONNS)
		return FI_XPU_I_NULL;
	return FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, fi_xpu_shm_ld(&c->maps[conn]));
}

/* Moves the remote completions peers pushed into the CQ's shared ring to
 * its private one. Of each entry only what a remote completion carries
 * (length, CQ data, source) is kept; flags are set here and context and
 * buffer are none, so a peer can never publish a completion of any other
 * kind, and a CQ that takes no remote events has no ring peers can reach.
 * An entry whose stamp the connection it names did not make is refused;
 * the source of the others is that connection's attested peer.
 * Overflows of the shared ring carry over as overflows of the private one. */
FI_XPU_FUNC void fi_xpu_shm_cq_take_remote(struct fi_xpu_shm_cq_dev *q)
{
	/* Set once by the host, before peers can push: read relaxed, as the
	 * words below, and fenced once when an entry or overflow is there. */
	struct fi_xpu_shm_cq_ring *rr = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, fi_xpu_shm_poll(&q->rring));
	struct fi_xpu_shm_cq_ring *r = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, q->ring);
	uint64_t ov, seen, *bell = FI_XPU_SHM_P(uint64_t, q->bell);
	int moved = 0;
	if (!rr)
		return;
	for (;;) {
		uint64_t t = fi_xpu_shm_poll(&q->rtail);
		struct fi_xpu_shm_cqe *e = fi_xpu_shm_ring_entry(rr, q->size, t);
		struct fi_xpu_shm_cqe_in in = fi_xpu_shm_cqe_zero();
		const struct fi_xpu_shm_peer_map *map;
		uint64_t conn, stamp;
		if (fi_xpu_shm_poll(&e->seq) != t + 1)
			break;
		fi_xpu_shm_acq();
		in.flags = FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA;
		in.len = fi_xpu_shm_ldr(&e->len);
		in.data = fi_xpu_shm_ldr(&e->data);
		in.src_ep = fi_xpu_shm_ldr(&e->src_ep);
		conn = fi_xpu_shm_ldr(&e->src_conn);
		stamp = fi_xpu_shm_ldr(&e->stamp);
		/* Claimed by this reader: the copy above is the entry. */
		if (!fi_xpu_shm_cas(&q->rtail, t, t + 1))
			continue;
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, fi_xpu_shm_st(&rr->tail, t + 1));
		map = fi_xpu_shm_conn_map(q->ctx, conn);
		if (!map || (in.src_ep >> 32) || in.len)
			continue; /* not made by the peer it names: refused */
		if (fi_xpu_shm_cqe_stamp(map->key, t, q->roff, in.src_ep, in.len, in.data) == stamp)
			in.src_nonce = fi_xpu_shm_ld(&map->nonce);
		else if (fi_xpu_shm_cqe_stamp(map->prev_key, t, q->roff, in.src_ep, in.len, in.data) ==
			 stamp)
			in.src_nonce = fi_xpu_shm_ld(&map->prev_nonce); /* a departed peer's */
		else
			continue;
		(void)fi_xpu_shm_ring_push(r, q->size, &in);
		moved = 1;
	}
	/* As in fi_xpu_shm_report_overrun: what was carried over first. */
	seen = fi_xpu_shm_poll(&q->rseen);
	ov = fi_xpu_shm_poll(&rr->overflow);
	if (ov != seen) {
		fi_xpu_shm_acq();
		/* A rewound or absurd count is a peer's scribble:
		 * resynchronised, never reported. */
		if (fi_xpu_shm_cas(&q->rseen, seen, ov) && ov - seen < (1ULL << 32)) {
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, fi_xpu_shm_add(&r->overflow, ov - seen));
			moved = 1;
		}
	}
	/* What moved into the private ring is an event of its own: another
	 * reader may have found both rings empty in between. */
	if (moved)
		fi_xpu_shm_ring_bell(bell, FI_XPU_SHM_SYS);
}

FI_XPU_FUNC int fi_xpu_shm_cq_push(uint64_t cq_dev, const struct fi_xpu_shm_cqe_in *in)
{
	struct fi_xpu_shm_cq_dev *q = FI_XPU_SHM_P(struct fi_xpu_shm_cq_dev, cq_dev);
	int rc;
	if (!q)
		return 0;
	rc = fi_xpu_shm_ring_push(FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, q->ring), q->size, in);
	/* An entry, or an overflow counted: either way the reader has work. */
	fi_xpu_shm_ring_bell(FI_XPU_SHM_P(uint64_t, q->bell), FI_XPU_SHM_SYS);
	return rc;
}

/* Local completion of an initiator operation, or its error, plus counters. */
FI_XPU_FUNC void fi_xpu_shm_complete(struct fi_xpu_shm_ep_dev *ep, int cntr, uint64_t flags,
				     void *context, size_t len, int err)
{
	struct fi_xpu_shm_cqe_in in = fi_xpu_shm_cqe_zero();
	uint64_t *c = FI_XPU_SHM_P(uint64_t, ep->cntr[cntr]);
	in.flags = flags;
	in.context = (uint64_t)(uintptr_t)context;
	in.len = err ? 0 : len;
	in.olen = err ? len : 0;
	in.err = err;
	/* The counter first: whoever reads the completion also sees it counted. */
	if (c)
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_shm_add(err ? c + 1 : c, 1));
	(void)fi_xpu_shm_cq_push(ep->tx_cq, &in);
}

/* ---- peers and protection --------------------------------------------- */
/* Base and size of region `rid` of a peer; 0 when unmapped. The host
 * withdraws a region by clearing its base, then its size, and maps one by
 * setting the size, then the base; a base that reads the same on both
 * sides of the size is the one that size belongs to (a withdrawn range
 * stays reserved for the next 1024 withdrawals, so its address does not
 * come back at once for another region). */
FI_XPU_FUNC uint64_t fi_xpu_shm_region(const struct fi_xpu_shm_peer_map *m, uint64_t rid,
				       uint64_t *size)
{
	uint64_t b;
	*size = 0;
	if (!m || rid == 0 || rid >= FI_XPU_SHM_MAX_REGIONS)
		return 0;
	b = fi_xpu_shm_ld(&m->base[rid]);
	*size = fi_xpu_shm_ld(&m->size[rid]);
	if (fi_xpu_shm_ld(&m->base[rid]) != b) {
		*size = 0;
		return 0;
	}
	return b;
}

struct fi_xpu_shm_target {
	const struct fi_xpu_shm_peer_addr *pa;
	const struct fi_xpu_shm_peer_map *map;
	unsigned char *heap;
	uint64_t heap_size;
	struct fi_xpu_shm_ep_block *ep;
	const struct fi_xpu_shm_ep_info *info;
	/* The scope of what is written into the peer (its peer address's). */
	int ms;
};
#define FI_XPU_SHM_NO_TARGET                                                              \
	{ FI_XPU_I_NULL, FI_XPU_I_NULL, FI_XPU_I_NULL, 0, FI_XPU_I_NULL, FI_XPU_I_NULL,     \
	  FI_XPU_SHM_SYS }

/* A raw AV address points into the context's table of peer addresses
 * (fi_xpu_av_lookup hands out nothing else); anything else is refused
 * before it is followed. */
FI_XPU_FUNC const struct fi_xpu_shm_peer_addr *fi_xpu_shm_peer(const struct fi_xpu_shm_ep_dev *ep,
								uint64_t raw)
{
	const struct fi_xpu_shm_ctx_dev *c =
		ep ? FI_XPU_SHM_P(const struct fi_xpu_shm_ctx_dev, ep->ctx)
		   : FI_XPU_I_NULL;
	uint64_t base = c ? c->peer_addrs : 0, off = raw - base;
	if (!base || raw < base ||
	    off >= (uint64_t)FI_XPU_SHM_PEER_ADDRS * sizeof(struct fi_xpu_shm_peer_addr) ||
	    off % sizeof(struct fi_xpu_shm_peer_addr))
		return FI_XPU_I_NULL;
	return FI_XPU_SHM_P(const struct fi_xpu_shm_peer_addr, raw);
}

/* Resolves a raw AV address: the peer endpoint's information (read-only
 * here), its heap and its block there. Whatever the information says is
 * checked against the heap before use. */
FI_XPU_FUNC int fi_xpu_shm_target_of(const struct fi_xpu_shm_ep_dev *ep, const void *dest_addr,
				  struct fi_xpu_shm_target *t)
{
	uint64_t isize = 0, hrid, boff;
	const unsigned char *ib;
	if (!dest_addr)
		return -FI_EINVAL;
	t->pa = fi_xpu_shm_peer(ep, *(const uint64_t *)dest_addr);
	if (!t->pa)
		return -FI_EINVAL;
	t->map = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, t->pa->map);
	t->ms = FI_XPU_SHM_MS(t->pa->scope);
	if (!t->map)
		return -FI_ENOTCONN;
	if (fi_xpu_shm_ld(&t->map->state) != FI_XPU_SHM_PEER_ALIVE)
		return -FI_ECONNRESET;
	/* The peer left and another one has its connection id now. */
	if (fi_xpu_shm_ld(&t->map->gen) != t->pa->map_gen)
		return -FI_ECONNRESET;
	ib = FI_XPU_SHM_P(const unsigned char,
			  fi_xpu_shm_region(t->map, t->pa->info_region, &isize));
	if (!ib || t->pa->info_off % 8 || t->pa->info_off > isize ||
	    isize - t->pa->info_off < sizeof(struct fi_xpu_shm_ep_info))
		return -FI_ENOTCONN;
	t->info = (const struct fi_xpu_shm_ep_info *)(const void *)(ib + t->pa->info_off);
	if (fi_xpu_shm_ld(&t->info->magic) != FI_XPU_SHM_EP_MAGIC)
		return -FI_ECONNRESET;
	hrid = fi_xpu_shm_ldr(&t->info->heap_region);
	boff = fi_xpu_shm_ldr(&t->info->block_off);
	t->heap = FI_XPU_SHM_P(unsigned char, fi_xpu_shm_region(t->map, hrid, &t->heap_size));
	if (!t->heap || boff % 8 || boff > t->heap_size || t->heap_size - boff < FI_XPU_SHM_PEER_BLOCK)
		return -FI_EIO;
	t->ep = (struct fi_xpu_shm_ep_block *)(void *)(t->heap + boff);
	/* The id may have been handed to a new peer while we looked: its
	 * regions are published after its generation, so a region of the new
	 * peer read above implies the new generation is visible here. */
	if (fi_xpu_shm_ld(&t->map->gen) != t->pa->map_gen)
		return -FI_ECONNRESET;
	return 0;
}

/* Checks `key` against the target's registration table for an access of
 * `len` bytes at `addr` needing `access`; on success `*out` is where that
 * memory is mapped here. Nothing is touched on failure. */
/* What fi_xpu_shm_rkey_at checked, for the resolve table. */
struct fi_xpu_shm_rkey_out {
	const uint64_t *genp;
	unsigned char *mem; /* where `base` is mapped here */
	uint64_t base, len, access;
};

FI_XPU_FUNC int fi_xpu_shm_rkey_at(const struct fi_xpu_shm_target *t, uint64_t addr, size_t len,
				   uint64_t key, uint64_t access, unsigned char **out,
				   struct fi_xpu_shm_rkey_out *res)
{
	uint64_t hrid = key >> 48, slot = (key >> 32) & 0xffff, gen = key & 0xffffffffULL;
	uint64_t hsize, msize, base, elen, mr_off, mr_slots, rid;
	const struct fi_xpu_shm_heap_hdr *h;
	struct fi_xpu_shm_mr_entry *e;
	unsigned char *heap, *mem;
	if (gen == 0)
		return -FI_EACCES;
	heap = FI_XPU_SHM_P(unsigned char, fi_xpu_shm_region(t->map, hrid, &hsize));
	if (!heap || hsize < sizeof(*h))
		return -FI_EACCES;
	h = (const struct fi_xpu_shm_heap_hdr *)(const void *)heap;
	/* The peer may write its header at any time: read each word once, and
	 * check alignment and range without a sum that could wrap. */
	mr_off = fi_xpu_shm_ldr(&h->mr_off);
	mr_slots = fi_xpu_shm_ldr(&h->mr_slots);
	if (slot >= mr_slots || mr_off % 8 != 0 || mr_off > hsize ||
	    (slot + 1) * sizeof(*e) > hsize - mr_off)
		return -FI_EACCES;
	e = (struct fi_xpu_shm_mr_entry *)(void *)(heap + mr_off) + slot;
	if (fi_xpu_shm_ld(&e->gen) != gen)
		return -FI_EACCES;
	if ((e->access & access) != access)
		return -FI_EACCES;
	base = e->base;
	elen = e->len;
	if (addr < base || len > elen || addr - base > elen - len)
		return -FI_EINVAL;
	rid = e->region;
	mem = FI_XPU_SHM_P(unsigned char, fi_xpu_shm_region(t->map, rid, &msize));
	if (!mem || msize < elen)
		return -FI_EACCES;
	/* A region the peer only lets us read (its registration table) is
	 * never written, whatever its entry says: the store would fault. */
	if ((access & FI_REMOTE_WRITE) &&
	    (fi_xpu_shm_ld(&t->map->ro[rid / 64]) >> (rid % 64) & 1))
		return -FI_EACCES;
	/* A registration closed while we checked: its generation changed. */
	if (fi_xpu_shm_ld(&e->gen) != gen)
		return -FI_EACCES;
	/* As in fi_xpu_shm_target: the region must be the addressed peer's. */
	if (fi_xpu_shm_ld(&t->map->gen) != t->pa->map_gen)
		return -FI_ECONNRESET;
	*out = mem + (addr - base);
	if (res) {
		res->genp = &e->gen;
		res->mem = mem;
		res->base = base;
		res->len = elen;
		/* What the entry allows that this mapping can do. */
		res->access = e->access & (FI_REMOTE_READ | FI_REMOTE_WRITE);
		if (fi_xpu_shm_ld(&t->map->ro[rid / 64]) >> (rid % 64) & 1)
			res->access &= ~(uint64_t)FI_REMOTE_WRITE;
	}
	return 0;
}

FI_XPU_FUNC int fi_xpu_shm_rkey(const struct fi_xpu_shm_target *t, uint64_t addr, size_t len,
				uint64_t key, uint64_t access, unsigned char **out)
{
	return fi_xpu_shm_rkey_at(t, addr, len, key, access, out, FI_XPU_I_NULL);
}

/* ---- the resolve table -------------------------------------------------
 * An RMA to (raw peer address, key) resolves once: the full resolution
 * above (fi_xpu_shm_target_of, fi_xpu_shm_rkey), out of line, leaves what
 * it found in an entry of the context's table (fi_xpu_shm_resolve_ent),
 * under the peer map's epoch read before it started. The next RMA to the
 * same pair reads the entry (at the pair's scope: the table is memory of
 * the context only its kernels touch) and checks what can change since:
 * the raw address's record (plain: local, written by the host before the
 * address was handed out), the bounds, and two words, the peer map's epoch
 * (the host moves it when the peer leaves, its id is reused or any of its
 * regions is withdrawn) and the registration's generation in the peer's
 * table (revocation). Either differing sends the RMA to the full
 * resolution, which returns today's error for what changed. */
FI_XPU_FUNC uint64_t fi_xpu_shm_ldr_at(const uint64_t *p, int ms)
{
	return fi_xpu_arch_load_u64(p, FI_XPU_ARCH_RELAXED, ms);
}
FI_XPU_FUNC void fi_xpu_shm_str_at(uint64_t *p, uint64_t v, int ms)
{
	fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELAXED, ms);
}

FI_XPU_FUNC struct fi_xpu_shm_resolve_ent *
fi_xpu_shm_resolve_slot(const struct fi_xpu_shm_ep_dev *ep, uint64_t pa, uint64_t key)
{
	const struct fi_xpu_shm_ctx_dev *c = FI_XPU_SHM_P(const struct fi_xpu_shm_ctx_dev, ep->ctx);
	uint64_t h = (pa >> 3) * 0x9e3779b97f4a7c15ULL ^ key * 0xc2b2ae3d27d4eb4fULL;
	if (!c || !c->resolve)
		return FI_XPU_I_NULL;
	return FI_XPU_SHM_P(struct fi_xpu_shm_resolve_ent, c->resolve) +
	       ((h >> 32) & (FI_XPU_SHM_RESOLVE_SLOTS - 1));
}

/* 1 with `*t` and `*out` set when entry `r` resolves (pa, key) for `len`
 * bytes at `addr` with `access`, and nothing it depends on changed. */
FI_XPU_FUNC int fi_xpu_shm_resolve_hit(const struct fi_xpu_shm_resolve_ent *r,
				       const struct fi_xpu_shm_peer_addr *pa, uint64_t addr,
				       size_t len, uint64_t key, uint64_t access,
				       struct fi_xpu_shm_target *t, unsigned char **out)
{
	int ms = FI_XPU_SHM_MS(pa->scope);
	uint64_t s = fi_xpu_shm_ld_at(&r->seq, ms), base, elen, epoch, mem, heap, hsize, info;
	const uint64_t *genp;
	const struct fi_xpu_shm_peer_map *map = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, pa->map);
	if (s == 0 || (s & 1) || !map || fi_xpu_shm_ldr_at(&r->pa, ms) != (uint64_t)(uintptr_t)pa ||
	    fi_xpu_shm_ldr_at(&r->key, ms) != key || fi_xpu_shm_ldr_at(&r->map, ms) != pa->map ||
	    fi_xpu_shm_ldr_at(&r->map_gen, ms) != pa->map_gen ||
	    fi_xpu_shm_ldr_at(&r->info_region, ms) != pa->info_region ||
	    fi_xpu_shm_ldr_at(&r->info_off, ms) != pa->info_off ||
	    (fi_xpu_shm_ldr_at(&r->access, ms) & access) != access)
		return 0;
	base = fi_xpu_shm_ldr_at(&r->base, ms);
	elen = fi_xpu_shm_ldr_at(&r->len, ms);
	epoch = fi_xpu_shm_ldr_at(&r->epoch, ms);
	genp = FI_XPU_SHM_P(const uint64_t, fi_xpu_shm_ldr_at(&r->genp, ms));
	mem = fi_xpu_shm_ldr_at(&r->mem, ms);
	heap = fi_xpu_shm_ldr_at(&r->heap, ms);
	hsize = fi_xpu_shm_ldr_at(&r->heap_size, ms);
	info = fi_xpu_shm_ldr_at(&r->info, ms);
	/* A writer that started since: what was read above may be torn. */
	fi_xpu_arch_fence(FI_XPU_ARCH_ACQUIRE, ms);
	if (fi_xpu_shm_ldr_at(&r->seq, ms) != s)
		return 0;
	/* Out of bounds: the full resolution reports it. */
	if (addr < base || len > elen || addr - base > elen - len)
		return 0;
	/* What can change: the peer's departure, its id reused or a region
	 * withdrawn (the host's epoch), the registration's revocation (its
	 * generation, the key's low 32 bits, in the peer's table). */
	if (fi_xpu_shm_ldr(&map->epoch) != epoch || fi_xpu_shm_ldr(genp) != (key & 0xffffffffULL))
		return 0;
	t->pa = pa;
	t->map = map;
	t->heap = FI_XPU_SHM_P(unsigned char, heap);
	t->heap_size = hsize;
	t->info = FI_XPU_SHM_P(const struct fi_xpu_shm_ep_info, info);
	t->ms = ms;
	*out = FI_XPU_SHM_P(unsigned char, mem) + (addr - base);
	return 1;
}

/* The full resolution of an RMA (its status is the RMA's), which leaves
 * what it found in entry `r` (NULL: none) for the next one. */
FI_XPU_NOINLINE_FUNC int fi_xpu_shm_resolve_full(const struct fi_xpu_shm_ep_dev *ep,
						 const void *dest_addr, uint64_t addr, size_t len,
						 uint64_t key, uint64_t access,
						 struct fi_xpu_shm_resolve_ent *r,
						 struct fi_xpu_shm_target *t, unsigned char **out)
{
	const struct fi_xpu_shm_peer_addr *pa =
		dest_addr ? fi_xpu_shm_peer(ep, *(const uint64_t *)dest_addr) : FI_XPU_I_NULL;
	const struct fi_xpu_shm_peer_map *map =
		pa ? FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, pa->map) : FI_XPU_I_NULL;
	/* The epoch before anything it covers is read. */
	uint64_t epoch = map ? fi_xpu_shm_ld(&map->epoch) : 0, s;
	struct fi_xpu_shm_rkey_out res;
	int rc = fi_xpu_shm_target_of(ep, dest_addr, t), ms;
	if (rc != 0 || !len)
		return rc;
	rc = fi_xpu_shm_rkey_at(t, addr, len, key, access, out, &res);
	if (rc != 0 || !r || t->pa != pa || t->map != map)
		return rc;
	/* One writer at a time; a busy entry is left to it. */
	ms = t->ms;
	s = fi_xpu_shm_ldr_at(&r->seq, ms);
	if ((s & 1) || !fi_xpu_shm_cas_at(&r->seq, s, s + 1, ms))
		return 0;
	fi_xpu_shm_str_at(&r->pa, (uint64_t)(uintptr_t)pa, ms);
	fi_xpu_shm_str_at(&r->map, pa->map, ms);
	fi_xpu_shm_str_at(&r->map_gen, pa->map_gen, ms);
	fi_xpu_shm_str_at(&r->info_region, pa->info_region, ms);
	fi_xpu_shm_str_at(&r->info_off, pa->info_off, ms);
	fi_xpu_shm_str_at(&r->key, key, ms);
	fi_xpu_shm_str_at(&r->epoch, epoch, ms);
	fi_xpu_shm_str_at(&r->genp, (uint64_t)(uintptr_t)res.genp, ms);
	fi_xpu_shm_str_at(&r->mem, (uint64_t)(uintptr_t)res.mem, ms);
	fi_xpu_shm_str_at(&r->base, res.base, ms);
	fi_xpu_shm_str_at(&r->len, res.len, ms);
	fi_xpu_shm_str_at(&r->access, res.access, ms);
	fi_xpu_shm_str_at(&r->heap, (uint64_t)(uintptr_t)t->heap, ms);
	fi_xpu_shm_str_at(&r->heap_size, t->heap_size, ms);
	fi_xpu_shm_str_at(&r->info, (uint64_t)(uintptr_t)t->info, ms);
	fi_xpu_shm_st_at(&r->seq, s + 2, ms);
	return 0;
}

/* Resolves an RMA's target and registration: from the resolve table
 * when an entry holds, by the full resolution otherwise. */
FI_XPU_FUNC int fi_xpu_shm_resolve(const struct fi_xpu_shm_ep_dev *ep, const void *dest_addr,
				   uint64_t addr, size_t len, uint64_t key, uint64_t access,
				   struct fi_xpu_shm_target *t, unsigned char **out)
{
	const struct fi_xpu_shm_peer_addr *pa =
		dest_addr ? fi_xpu_shm_peer(ep, *(const uint64_t *)dest_addr) : FI_XPU_I_NULL;
	struct fi_xpu_shm_resolve_ent *r =
		pa && len ? fi_xpu_shm_resolve_slot(ep, (uint64_t)(uintptr_t)pa, key) : FI_XPU_I_NULL;
	if (r && fi_xpu_shm_resolve_hit(r, pa, addr, len, key, access, t, out))
		return 0;
	return fi_xpu_shm_resolve_full(ep, dest_addr, addr, len, key, access, r, t, out);
}

/* Whether `n` bytes at heap offset `off` (read once by the caller) lie in
 * the target's heap, 8-byte aligned; no sum that could wrap. */
FI_XPU_FUNC int fi_xpu_shm_theap_ok(const struct fi_xpu_shm_target *t, uint64_t off, uint64_t n)
{
	return off != 0 && (off & 7) == 0 && off <= t->heap_size && n <= t->heap_size - off;
}

/* The target's counter whose heap offset is the word at `offp` (in the
 * target's endpoint block), checked against the heap; 0 when none. */
FI_XPU_FUNC uint64_t *fi_xpu_shm_tcntr(const struct fi_xpu_shm_target *t, const uint64_t *offp)
{
	uint64_t off = fi_xpu_shm_ldr(offp);
	if (!fi_xpu_shm_theap_ok(t, off, sizeof(struct fi_xpu_shm_cntr)))
		return FI_XPU_I_NULL;
	return (uint64_t *)(void *)(t->heap + off);
}

/* The bell of the target's heap (its header is at offset 0; the heap is
 * longer than an endpoint block, fi_xpu_shm_target_of). */
FI_XPU_FUNC uint64_t *fi_xpu_shm_tbell(const struct fi_xpu_shm_target *t)
{
	return &((struct fi_xpu_shm_heap_hdr *)(void *)t->heap)->bell;
}

/* Writes a completion into the target's receive CQ (remote CQ data,
 * received messages). */
FI_XPU_FUNC int fi_xpu_shm_tcq_push(const struct fi_xpu_shm_target *t,
				    const struct fi_xpu_shm_cqe_in *in)
{
	uint64_t off = fi_xpu_shm_ldr(&t->info->rx_cq), size;
	struct fi_xpu_shm_cq_ring *r;
	int rc;
	struct fi_xpu_shm_cqe_in s = *in;
	if (!fi_xpu_shm_theap_ok(t, off, FI_XPU_SHM_CQ_HDR))
		return -FI_EOPNOTSUPP;
	r = (struct fi_xpu_shm_cq_ring *)(void *)(t->heap + off);
	size = fi_xpu_shm_ldr(&r->size);
	if (size == 0 || (size & (size - 1)) ||
	    size > (t->heap_size - off - FI_XPU_SHM_CQ_HDR) / sizeof(struct fi_xpu_shm_cqe))
		return -FI_EIO;
	/* Stamped for this ring under the key the target gave us. */
	s.key = t->pa->key;
	s.src_conn = t->pa->conn_at_peer;
	s.roff = off;
	rc = fi_xpu_shm_ring_push(r, size, &s);
	fi_xpu_shm_ring_bell(fi_xpu_shm_tbell(t), t->ms);
	return rc;
}

/* The device blocks behind handles, or NULL unless the block's validity
 * word says live, of that class, of this version (fi_xpu/device_handle.h). */
/* The endpoint's validity word is a plain load, as a CQ poll's (only the
 * host writes it, at open and close; the block stays mapped until its
 * context closes): every operation starts here. */
FI_XPU_FUNC struct fi_xpu_shm_ep_dev *fi_xpu_shm_ep(const struct fid_xpu_ep *ep)
{
	struct fi_xpu_shm_ep_dev *d =
		ep ? FI_XPU_SHM_P(struct fi_xpu_shm_ep_dev, ep->fid.prov_ctx)
		   : FI_XPU_I_NULL;
	return d && d->magic == FI_XPU_HANDLE_WORD(FI_XPU_HANDLE_EP, FI_XPU_HANDLE_LIVE)
		       ? d
		       : FI_XPU_I_NULL;
}

/* The abort word of an endpoint's context (0: none), for the waits that
 * are given an endpoint (fi_xpu_signal_wait_until). */
FI_XPU_FUNC uint64_t fi_xpu_shm_abort_word(const struct fid_xpu_ep *hep)
{
	const struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	return ep && ep->ctx ? FI_XPU_SHM_P(const struct fi_xpu_shm_ctx_dev, ep->ctx)->abort : 0;
}

FI_XPU_FUNC struct fi_xpu_shm_cq_dev *fi_xpu_shm_cq(const struct fid_xpu_cq *cq)
{
	struct fi_xpu_shm_cq_dev *d =
		cq ? FI_XPU_SHM_P(struct fi_xpu_shm_cq_dev, cq->fid.prov_ctx)
		   : FI_XPU_I_NULL;
	return d && fi_xpu_handle_live(&d->magic, FI_XPU_HANDLE_CQ) ? d
								     : FI_XPU_I_NULL;
}

/* ---- scopes ------------------------------------------------------------- */
/* Every work item of `scope` runs the operation; rank 0 does the
 * bookkeeping, all ranks share the bulk copy, and all return rank 0's
 * status. */
#define FI_XPU_SHM_SCOPE_ENTER(scope, rank)                                      \
	int fi_xpu_i_shm_rc = fi_xpu_arch_scope_check(scope);                     \
	uint32_t rank;                                                            \
	if (fi_xpu_i_shm_rc)                                                      \
		return fi_xpu_i_shm_rc;                                           \
	rank = (scope) == FI_XPU_WORK_ITEM ? 0 : fi_xpu_arch_scope_rank(scope)

/* Broadcasts rank 0's value of `v` (an int64_t) to the scope. */
FI_XPU_FUNC int64_t fi_xpu_shm_bcast(int scope, int64_t v)
{
	uint64_t u = (uint64_t)v;
	if (scope == FI_XPU_WORK_ITEM)
		return v;
	fi_xpu_arch_broadcast_u64(scope, &u);
	return (int64_t)u;
}

FI_XPU_FUNC void fi_xpu_shm_sync(int scope)
{
	if (scope != FI_XPU_WORK_ITEM)
		fi_xpu_arch_barrier(scope);
}

/* ---- RMA ---------------------------------------------------------------- */
FI_XPU_FUNC int fi_xpu_shm_rma(const struct fid_xpu_ep *hep, int is_write, void *buf, size_t len,
			       const void *dest_addr, uint64_t addr, uint64_t key, uint64_t data,
			       uint64_t flags, void *context, int scope)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	unsigned char *mem = FI_XPU_I_NULL;
	int64_t rc = 0;
	int err = 0;
	uint64_t cflags = (is_write ? FI_WRITE : FI_READ) | FI_RMA;
	FI_XPU_SHM_SCOPE_ENTER(scope, rank);
	if (!ep || (!buf && len))
		return -FI_EINVAL;
	/* FI_COMPLETION with no CQ bound for transmit: the completion would go
	 * nowhere, and whoever waits for it would wait forever. */
	if ((flags & FI_COMPLETION) && !ep->tx_cq)
		return -FI_ENOCQ;
	if (rank == 0) {
		/* A bad address is the caller's error, returned as such. */
		rc = fi_xpu_shm_resolve(ep, dest_addr, addr, len, key,
					is_write ? FI_REMOTE_WRITE : FI_REMOTE_READ, &t, &mem);
		if (rc == 0 && is_write && (flags & FI_REMOTE_CQ_DATA) &&
		    fi_xpu_shm_ldr(&t.info->rx_cq) == 0)
			rc = -FI_EOPNOTSUPP;
		/* A refused access is reported as an error completion (below). */
		if (t.info && (rc == -FI_EACCES || rc == -FI_EINVAL || rc == -FI_EOPNOTSUPP)) {
			err = (int)rc;
			rc = 1;
		}
	}
	/* Success goes out as 2 + the target's scope, so that one broadcast
	 * gives the members both. */
	rc = fi_xpu_shm_bcast(scope, rc ? rc : 2 + t.ms);
	if (rc < 1)
		return (int)rc;
	if (rc >= 2) {
		t.ms = (int)(rc - 2);
		mem = (unsigned char *)(uintptr_t)fi_xpu_shm_bcast(scope, (int64_t)(uintptr_t)mem);
		/* A write's data, then (the fence at the peer's scope) what
		 * announces it: the remote completion and counter, our own
		 * completion. */
		if (is_write)
			fi_xpu_coop_copy(mem, buf, len, scope, t.ms);
		else
			fi_xpu_coop_copy(buf, mem, len, scope, t.ms);
		fi_xpu_arch_fence(FI_XPU_ARCH_SEQ_CST, t.ms);
	}
	if (rank == 0 && rc >= 2) {
		if (is_write && (flags & FI_REMOTE_CQ_DATA)) {
			struct fi_xpu_shm_cqe_in in = fi_xpu_shm_cqe_zero();
			in.flags = FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA;
			/* len and buf stay 0, as on every provider: libfabric
			 * defines them for receives only and its transports
			 * disagree (tcp reports 0). */
			in.data = data;
			in.src_nonce = ep->nonce;
			in.src_ep = ep->ep_id;
			(void)fi_xpu_shm_tcq_push(&t, &in);
		}
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_shm_add(fi_xpu_shm_tcntr(&t, is_write ? &t.info->rem_write_cntr
							   : &t.info->rem_read_cntr),
			       1));
	}
	/* Our own completion, or a refusal's error completion: one place. */
	if (rank == 0)
		fi_xpu_shm_complete(ep, is_write ? FI_XPU_SHM_CNTR_WRITE : FI_XPU_SHM_CNTR_READ,
				    cflags, context, len, err);
	if (rc >= 2)
		fi_xpu_shm_sync(scope);
	return 0;
}

/* ---- atomics ------------------------------------------------------------ */
FI_XPU_FUNC int fi_xpu_shm_dt_size(int dt)
{
	switch (dt) {
	case FI_INT8: case FI_UINT8: return 1;
	case FI_INT16: case FI_UINT16: return 2;
	case FI_INT32: case FI_UINT32: case FI_FLOAT: return 4;
	case FI_INT64: case FI_UINT64: case FI_DOUBLE: return 8;
	default: return 0;
	}
}

FI_XPU_FUNC int fi_xpu_shm_op_ok(int op, int dt)
{
	int fp = dt == FI_FLOAT || dt == FI_DOUBLE;
	if (fi_xpu_shm_dt_size(dt) == 0 || op < 0 || op >= FI_ATOMIC_OP_LAST)
		return 0;
	if (fp && (op == FI_BOR || op == FI_BAND || op == FI_BXOR || op == FI_MSWAP ||
		   op == FI_LOR || op == FI_LAND || op == FI_LXOR))
		return 0;
	return 1;
}

/* Values of any supported type, as a signed, unsigned or float number. */
struct fi_xpu_shm_num {
	int kind; /* 0 signed, 1 unsigned, 2 float */
	int64_t s;
	uint64_t u;
	double f;
};

FI_XPU_FUNC struct fi_xpu_shm_num fi_xpu_shm_decode(int dt, uint64_t bits)
{
	struct fi_xpu_shm_num n = {0, 0, 0, 0.0};
	union { uint32_t u; float f; } f32;
	union { uint64_t u; double f; } f64;
	switch (dt) {
	case FI_INT8: n.s = (int8_t)bits; break;
	case FI_INT16: n.s = (int16_t)bits; break;
	case FI_INT32: n.s = (int32_t)bits; break;
	case FI_INT64: n.s = (int64_t)bits; break;
	case FI_UINT8: n.kind = 1; n.u = (uint8_t)bits; break;
	case FI_UINT16: n.kind = 1; n.u = (uint16_t)bits; break;
	case FI_UINT32: n.kind = 1; n.u = (uint32_t)bits; break;
	case FI_UINT64: n.kind = 1; n.u = bits; break;
	case FI_FLOAT: n.kind = 2; f32.u = (uint32_t)bits; n.f = (double)f32.f; break;
	default: n.kind = 2; f64.u = bits; n.f = f64.f; break;
	}
	return n;
}

/* -1, 0, 1 as a compares to b. */
FI_XPU_FUNC int fi_xpu_shm_cmp(struct fi_xpu_shm_num a, struct fi_xpu_shm_num b)
{
	if (a.kind == 0)
		return a.s < b.s ? -1 : a.s > b.s;
	if (a.kind == 1)
		return a.u < b.u ? -1 : a.u > b.u;
	return a.f < b.f ? -1 : a.f > b.f;
}

FI_XPU_FUNC int fi_xpu_shm_truth(int dt, uint64_t bits)
{
	struct fi_xpu_shm_num n = fi_xpu_shm_decode(dt, bits);
	/* A float's truth as C's: not zero, NaN included (written without ==
	 * for builds with -Wfloat-equal). */
	return n.kind == 2 ? !(n.f >= 0.0 && n.f <= 0.0) : (n.kind == 0 ? n.s != 0 : n.u != 0);
}

FI_XPU_FUNC uint64_t fi_xpu_shm_mask(int dt)
{
	int sz = fi_xpu_shm_dt_size(dt);
	return sz == 8 ? ~0ULL : ((1ULL << (sz * 8)) - 1);
}

/* New bits for `old` under op; returns 0 when nothing is to be written. */
FI_XPU_FUNC int fi_xpu_shm_apply(int op, int dt, uint64_t old, uint64_t v, uint64_t cmp,
				 uint64_t *out)
{
	struct fi_xpu_shm_num a = fi_xpu_shm_decode(dt, old), b = fi_xpu_shm_decode(dt, v);
	struct fi_xpu_shm_num c = fi_xpu_shm_decode(dt, cmp);
	uint64_t r = old;
	union { uint32_t u; float f; } f32;
	union { uint64_t u; double f; } f64;
	switch (op) {
	case FI_MIN: r = fi_xpu_shm_cmp(b, a) < 0 ? v : old; break;
	case FI_MAX: r = fi_xpu_shm_cmp(b, a) > 0 ? v : old; break;
	case FI_SUM:
	case FI_PROD:
		if (a.kind == 2) {
			double x = op == FI_SUM ? a.f + b.f : a.f * b.f;
			if (dt == FI_FLOAT) {
				f32.f = (float)x;
				r = f32.u;
			} else {
				f64.f = x;
				r = f64.u;
			}
		} else {
			r = op == FI_SUM ? old + v : old * v;
		}
		break;
	case FI_LOR: r = fi_xpu_shm_truth(dt, old) || fi_xpu_shm_truth(dt, v); break;
	case FI_LAND: r = fi_xpu_shm_truth(dt, old) && fi_xpu_shm_truth(dt, v); break;
	case FI_LXOR: r = fi_xpu_shm_truth(dt, old) != fi_xpu_shm_truth(dt, v); break;
	case FI_BOR: r = old | v; break;
	case FI_BAND: r = old & v; break;
	case FI_BXOR: r = old ^ v; break;
	case FI_ATOMIC_READ: return 0;
	case FI_ATOMIC_WRITE: r = v; break;
	case FI_CSWAP: if (fi_xpu_shm_cmp(c, a) != 0) return 0; r = v; break;
	case FI_CSWAP_NE: if (fi_xpu_shm_cmp(c, a) == 0) return 0; r = v; break;
	case FI_CSWAP_LE: if (fi_xpu_shm_cmp(c, a) > 0) return 0; r = v; break;
	case FI_CSWAP_LT: if (fi_xpu_shm_cmp(c, a) >= 0) return 0; r = v; break;
	case FI_CSWAP_GE: if (fi_xpu_shm_cmp(c, a) < 0) return 0; r = v; break;
	case FI_CSWAP_GT: if (fi_xpu_shm_cmp(c, a) <= 0) return 0; r = v; break;
	case FI_MSWAP: r = (v & cmp) | (old & ~cmp); break;
	default: return 0;
	}
	*out = r & fi_xpu_shm_mask(dt);
	return 1;
}

FI_XPU_FUNC uint64_t fi_xpu_shm_get(const void *p, int sz)
{
	switch (sz) {
	case 1: return *(const uint8_t *)p;
	case 2: return *(const uint16_t *)p;
	case 4: return *(const uint32_t *)p;
	default: return *(const uint64_t *)p;
	}
}

FI_XPU_FUNC void fi_xpu_shm_put(void *p, int sz, uint64_t v)
{
	switch (sz) {
	case 1: *(uint8_t *)p = (uint8_t)v; break;
	case 2: *(uint16_t *)p = (uint16_t)v; break;
	case 4: *(uint32_t *)p = (uint32_t)v; break;
	default: *(uint64_t *)p = v; break;
	}
}

/* One element, atomic against every other atomic from any process: a
 * system-scope CAS loop on the naturally aligned word that holds it (the
 * 32-bit word around 8- and 16-bit elements). Returns the old bits. */
FI_XPU_FUNC uint64_t fi_xpu_shm_atomic1(unsigned char *p, int op, int dt, uint64_t v, uint64_t cmp)
{
	int sz = fi_xpu_shm_dt_size(dt);
	uint64_t old, nv;
	if (sz == 8) {
		uint64_t *w = (uint64_t *)(void *)p;
		old = fi_xpu_arch_load_u64(w, FI_XPU_ARCH_ACQUIRE, FI_XPU_SHM_SYS);
		for (;;) {
			uint64_t seen;
			if (!fi_xpu_shm_apply(op, dt, old, v, cmp, &nv))
				return old;
			seen = fi_xpu_arch_cas_u64(w, old, nv, FI_XPU_ARCH_ACQ_REL, FI_XPU_SHM_SYS);
			if (seen == old)
				return old;
			old = seen;
		}
	} else {
		uint32_t *w = (uint32_t *)(void *)((uintptr_t)p & ~(uintptr_t)3);
		unsigned shift = (unsigned)(((uintptr_t)p & 3) * 8);
		uint32_t emask = sz == 4 ? 0xffffffffu : (uint32_t)(((1u << (sz * 8)) - 1) << shift);
		uint32_t word = fi_xpu_arch_load_u32(w, FI_XPU_ARCH_ACQUIRE, FI_XPU_SHM_SYS);
		for (;;) {
			uint32_t seen, nw;
			old = (uint64_t)((word & emask) >> shift);
			if (!fi_xpu_shm_apply(op, dt, old, v, cmp, &nv))
				return old;
			nw = (word & ~emask) | (((uint32_t)nv << shift) & emask);
			seen = fi_xpu_arch_cas_u32(w, word, nw, FI_XPU_ARCH_ACQ_REL, FI_XPU_SHM_SYS);
			if (seen == word)
				return old;
			word = seen;
		}
	}
}

FI_XPU_FUNC int fi_xpu_shm_atomic_any(const struct fid_xpu_ep *hep, const void *buf, size_t count,
				      const void *compare, void *result, const void *dest_addr,
				      uint64_t addr, uint64_t key, int datatype, int op,
				      uint64_t flags, void *context, int scope)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	unsigned char *mem = FI_XPU_I_NULL;
	int64_t rc = 0;
	int sz = fi_xpu_shm_dt_size(datatype);
	int is_cmp = op >= FI_CSWAP && op <= FI_MSWAP;
	uint64_t need, cflags = FI_ATOMIC | (result ? FI_READ : FI_WRITE), old1 = 0;
	size_t i;
	FI_XPU_SHM_SCOPE_ENTER(scope, rank);
	(void)flags;
	if (!ep)
		return -FI_EINVAL;
	if (!fi_xpu_shm_op_ok(op, datatype))
		return -FI_EOPNOTSUPP;
	if ((is_cmp && (!compare || !result)) || (op != FI_ATOMIC_READ && !buf && count) ||
	    (op == FI_ATOMIC_READ && !result))
		return -FI_EINVAL;
	if (addr % (uint64_t)sz || count > (size_t)-1 / (size_t)sz)
		return -FI_EINVAL;
	need = op == FI_ATOMIC_READ ? FI_REMOTE_READ
				    : (result ? FI_REMOTE_READ | FI_REMOTE_WRITE : FI_REMOTE_WRITE);
	if (rank == 0) {
		rc = fi_xpu_shm_target_of(ep, dest_addr, &t);
		if (rc == 0)
			rc = fi_xpu_shm_rkey(&t, addr, count * (size_t)sz, key, need, &mem);
		/* The registration's base comes from the target: the element
		 * must be aligned where it is mapped here, too. */
		if (rc == 0 && (uintptr_t)mem % (uintptr_t)sz)
			rc = -FI_EINVAL;
		if (t.ep && (rc == -FI_EACCES || rc == -FI_EINVAL)) {
			fi_xpu_shm_complete(ep, result ? FI_XPU_SHM_CNTR_READ : FI_XPU_SHM_CNTR_WRITE,
					    cflags, context, count * (size_t)sz, (int)rc);
			rc = 1;
		}
		if (rc == 0) {
			for (i = 0; i < count; i++) {
				size_t off = i * (size_t)sz;
				uint64_t v = buf ? fi_xpu_shm_get((const unsigned char *)buf + off, sz) : 0;
				uint64_t c = compare ? fi_xpu_shm_get((const unsigned char *)compare + off, sz) : 0;
				uint64_t old = fi_xpu_shm_atomic1(mem + off, op, datatype, v, c);
				if (result)
					fi_xpu_shm_put((unsigned char *)result + off, sz, old);
				old1 = old;
			}
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_shm_add(fi_xpu_shm_tcntr(&t, op == FI_ATOMIC_READ ? &t.info->rem_read_cntr
										  : &t.info->rem_write_cntr),
				       1));
			fi_xpu_shm_complete(ep, result ? FI_XPU_SHM_CNTR_READ : FI_XPU_SHM_CNTR_WRITE,
					    cflags, context, count * (size_t)sz, 0);
		}
	}
	rc = fi_xpu_shm_bcast(scope, rc);
	/* Every work item gets a single fetched value, even when each passed
	 * a result buffer of its own. */
	if (rc == 0 && result && count == 1 && scope != FI_XPU_WORK_ITEM) {
		old1 = (uint64_t)fi_xpu_shm_bcast(scope, (int64_t)old1);
		if (rank != 0)
			fi_xpu_shm_put(result, sz, old1);
	}
	return rc == 1 ? 0 : (int)rc;
}

/* ---- messages ----------------------------------------------------------- */
/* The inbox follows its endpoint block; its geometry is fixed, so no value
 * another process can write decides where a slot is. */
FI_XPU_FUNC struct fi_xpu_shm_msg *fi_xpu_shm_slot(struct fi_xpu_shm_ep_block *b, uint64_t pos)
{
	return (struct fi_xpu_shm_msg *)(void *)((unsigned char *)(b + 1) +
						 (pos % FI_XPU_SHM_INBOX_SLOTS) *
							 FI_XPU_SHM_SLOT_SIZE);
}

FI_XPU_FUNC int fi_xpu_shm_lock(struct fi_xpu_shm_ep_dev *ep, int wait)
{
	while (!fi_xpu_shm_cas(&ep->lock, 0, 1)) {
		if (!wait)
			return 0;
		fi_xpu_arch_pause();
	}
	return 1;
}

FI_XPU_FUNC void fi_xpu_shm_unlock(struct fi_xpu_shm_ep_dev *ep)
{
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_LOCK, fi_xpu_shm_st(&ep->lock, 0));
}

FI_XPU_FUNC void fi_xpu_shm_progress(struct fi_xpu_shm_ep_dev *ep);

/* Nothing arrived in the endpoint's inbox and nothing of its own is under
 * way (fi_xpu_shm_ep_dev.busy): progress would do nothing. Three relaxed
 * words; a stale answer only moves the work to the next poll. */
FI_XPU_FUNC int fi_xpu_shm_ep_idle(const struct fi_xpu_shm_ep_dev *ep)
{
	const struct fi_xpu_shm_ep_block *b;
	if (!ep)
		return 1;
	b = FI_XPU_SHM_P(const struct fi_xpu_shm_ep_block, ep->block);
	return fi_xpu_shm_poll(&b->head) == fi_xpu_shm_poll(&b->tail) &&
	       fi_xpu_shm_poll(&ep->busy) == 0;
}

/* The bell of an endpoint's context heap (fi_xpu_shm_ring_bell). */
FI_XPU_FUNC uint64_t *fi_xpu_shm_ep_bell(const struct fi_xpu_shm_ep_dev *ep)
{
	const struct fi_xpu_shm_ctx_dev *c = FI_XPU_SHM_P(const struct fi_xpu_shm_ctx_dev, ep->ctx);
	return c && c->heap_base ? &FI_XPU_SHM_P(struct fi_xpu_shm_heap_hdr, c->heap_base)->bell
				 : FI_XPU_I_NULL;
}

/* Where this process writes lane `lane` of an endpoint's staging area. */
FI_XPU_FUNC unsigned char *fi_xpu_shm_lane(const struct fi_xpu_shm_ep_dev *ep, uint64_t lane)
{
	return FI_XPU_SHM_P(unsigned char, ep->stage) + lane * FI_XPU_SHM_STAGE_LANE_SIZE;
}

/* Copies `n` bytes between a flat buffer and a lane (a byte ring) at
 * stream position `pos`, in two pieces where the ring wraps. */
FI_XPU_FUNC void fi_xpu_shm_lane_copy(unsigned char *lane, uint64_t pos, unsigned char *flat,
				      uint64_t n, int into_lane)
{
	uint64_t at = pos % FI_XPU_SHM_STAGE_LANE_SIZE;
	uint64_t first = FI_XPU_SHM_STAGE_LANE_SIZE - at < n ? FI_XPU_SHM_STAGE_LANE_SIZE - at : n;
	if (into_lane) {
		fi_xpu_shm_copy(lane + at, flat, first);
		fi_xpu_shm_copy(lane, flat + first, n - first);
	} else {
		fi_xpu_shm_copy(flat, lane + at, first);
		fi_xpu_shm_copy(flat + first, lane, n - first);
	}
}

/* The map of the connection a message came through, when it is still the
 * connection the message was sent on (same generation); 0 otherwise. */
FI_XPU_FUNC const struct fi_xpu_shm_peer_map *fi_xpu_shm_src_map(const struct fi_xpu_shm_ep_dev *ep,
								 uint64_t conn, uint64_t gen)
{
	const struct fi_xpu_shm_peer_map *map = fi_xpu_shm_conn_map(ep->ctx, conn);
	if (!map || fi_xpu_shm_ld(&map->gen) != gen)
		return FI_XPU_I_NULL;
	return map;
}

FI_XPU_FUNC int fi_xpu_shm_peer_alive(const struct fi_xpu_shm_peer_map *map)
{
	return map && fi_xpu_shm_ld(&map->state) == FI_XPU_SHM_PEER_ALIVE;
}

FI_XPU_FUNC int fi_xpu_shm_send_any(const struct fid_xpu_ep *hep, const void *buf, size_t len,
				    void *desc, const void *dest_addr, uint64_t tag, uint64_t data,
				    uint64_t flags, void *context, int scope)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	struct fi_xpu_shm_msg *m = FI_XPU_I_NULL;
	uint64_t h = 0, tl, src_region = 0, src_off = 0, lane = 0;
	uint64_t cflags = FI_SEND | ((flags & FI_TAGGED) ? FI_TAGGED : FI_MSG);
	int64_t rc = 0;
	int large = 0, kind = 0, r = 0, locked = 0;
	FI_XPU_SHM_SCOPE_ENTER(scope, rank);
	if (!ep || (!buf && len))
		return -FI_EINVAL;
	/* FI_INJECT: the source must be copied before the call returns, which
	 * only an eager send does. */
	if ((flags & FI_INJECT) && len > FI_XPU_SHM_EAGER_MAX)
		return -FI_EMSGSIZE;
	if (rank == 0) {
		rc = fi_xpu_shm_target_of(ep, dest_addr, &t);
		if (rc == 0 && len > FI_XPU_SHM_EAGER_MAX) {
			const struct fi_xpu_shm_mr_desc *d = (const struct fi_xpu_shm_mr_desc *)desc;
			uint64_t a = (uint64_t)(uintptr_t)buf;
			large = 1;
			fi_xpu_shm_lock(ep, 1);
			locked = 1;
			for (r = 0; r < FI_XPU_SHM_MAX_POSTED; r++)
				if (ep->rdv[r].slot == 0)
					break;
			if (r == FI_XPU_SHM_MAX_POSTED) {
				rc = -FI_EAGAIN;
			} else if (d && a >= d->base && len <= d->len && a - d->base <= d->len - len) {
				/* Registered: the receiver pulls straight from it. */
				kind = FI_XPU_SHM_RDV_REG;
				src_region = d->region;
				src_off = a - d->base;
			} else {
				/* Unregistered: streamed through a staging lane,
				 * which peers map read-only. */
				for (lane = 0; lane < FI_XPU_SHM_STAGE_LANES; lane++)
					if (!(ep->lanes & (1ULL << lane)))
						break;
				if (lane == FI_XPU_SHM_STAGE_LANES) {
					rc = -FI_EAGAIN;
				} else {
					kind = FI_XPU_SHM_RDV_STREAM;
					src_region = ep->stage_region;
					src_off = ep->stage_off + lane * FI_XPU_SHM_STAGE_LANE_SIZE;
				}
			}
		}
		while (rc == 0) {
			/* The tail first, as in fi_xpu_shm_ring_put: otherwise
			 * a busy inbox can look full with room in it. */
			tl = fi_xpu_shm_ld_at(&t.ep->tail, t.ms);
			h = fi_xpu_shm_ld_at(&t.ep->head, t.ms);
			if (h - tl >= FI_XPU_SHM_INBOX_SLOTS) {
				rc = -FI_EAGAIN;
				break;
			}
			if (fi_xpu_shm_cas_at(&t.ep->head, h, h + 1, t.ms)) {
				m = fi_xpu_shm_slot(t.ep, h);
				break;
			}
		}
		if (rc == 0) {
			uint64_t mflags = (flags & (FI_TAGGED | FI_REMOTE_CQ_DATA)) |
					  (kind == FI_XPU_SHM_RDV_REG      ? FI_XPU_SHM_MSG_RDV
					   : kind == FI_XPU_SHM_RDV_STREAM ? FI_XPU_SHM_MSG_STREAM
									   : 0);
			struct fi_xpu_shm_msg_id id;
			m->state = FI_XPU_SHM_SLOT_NEW;
			m->len = len;
			m->tag = tag;
			m->data = data;
			m->flags = mflags;
			id.pos = h;
			id.ep_id = t.pa->ep_id;
			id.src_ep = ep->ep_id;
			id.flags = mflags;
			id.len = len;
			id.tag = tag;
			id.data = data;
			id.src_region = src_region;
			id.src_off = src_off;
			m->stamp = fi_xpu_shm_msg_stamp(t.pa->key, &id);
			m->pstamp = large ? 0 : fi_xpu_shm_bytes_stamp(t.pa->key, h, buf, len, buf, len);
			m->cstamp = 0;
			m->src_ep = ep->ep_id;
			m->src_conn = t.pa->conn_at_peer;
			m->src_gen = t.pa->conn_gen;
			m->src_region = src_region;
			m->src_off = src_off;
			m->produced = 0;
			m->consumed = 0;
		}
		if (rc == 0 && large) {
			/* The receiver finishes the transfer; our progress
			 * reports the send (and feeds a stream) until then. */
			struct fi_xpu_shm_rdv *q = &ep->rdv[r];
			q->context = (uint64_t)(uintptr_t)context;
			q->len = len;
			q->flags = cflags;
			q->buf = (uint64_t)(uintptr_t)buf;
			q->sent = 0;
			q->lane = lane;
			q->kind = (uint64_t)kind;
			q->map = (uint64_t)(uintptr_t)t.map;
			q->gen = t.pa->map_gen;
			q->pos = h;
			q->rep = t.pa->ep_id;
			q->key[0] = t.pa->key[0];
			q->key[1] = t.pa->key[1];
			q->acked = 0;
			q->cseen = 0;
			q->pst = 0;
			if (kind == FI_XPU_SHM_RDV_STREAM)
				ep->lanes |= 1ULL << lane;
			fi_xpu_shm_str(&ep->busy, 1);
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&q->slot, (uint64_t)(uintptr_t)m));
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st_at(&m->seq, h + 1, t.ms));
			/* The receiver's CQs, and ours: this endpoint is busy. */
			fi_xpu_shm_ring_bell(fi_xpu_shm_tbell(&t), t.ms);
			fi_xpu_shm_ring_bell(fi_xpu_shm_ep_bell(ep), FI_XPU_SHM_SYS);
		}
		if (locked)
			fi_xpu_shm_unlock(ep);
		if (rc == 0 && kind == FI_XPU_SHM_RDV_STREAM)
			fi_xpu_shm_progress(ep);
	}
	/* Success goes out as 2 + the target's scope, as in fi_xpu_shm_rma. */
	rc = fi_xpu_shm_bcast(scope, rc ? rc : 2 + t.ms);
	if (rc < 2)
		return (int)rc;
	t.ms = (int)(rc - 2);
	large = (int)fi_xpu_shm_bcast(scope, large);
	if (!large) {
		m = (struct fi_xpu_shm_msg *)(uintptr_t)fi_xpu_shm_bcast(scope, (int64_t)(uintptr_t)m);
		fi_xpu_coop_copy((unsigned char *)m + FI_XPU_SHM_MSG_HDR, buf, len, scope, t.ms);
		if (rank == 0) {
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st_at(&m->seq, h + 1, t.ms));
			fi_xpu_shm_ring_bell(fi_xpu_shm_tbell(&t), t.ms);
			fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_SEND, cflags, context, len, 0);
		}
	}
	fi_xpu_shm_sync(scope);
	return 0;
}

/* Reads the header of an arrived message once: senders may rewrite the
 * slot at any time, so matching and delivery use this copy only. */
FI_XPU_FUNC void fi_xpu_shm_msg_read(const struct fi_xpu_shm_msg *m, struct fi_xpu_shm_msg_seen *h)
{
	h->seq = fi_xpu_shm_ldr(&m->seq);
	h->state = fi_xpu_shm_ldr(&m->state);
	h->len = fi_xpu_shm_ldr(&m->len);
	h->tag = fi_xpu_shm_ldr(&m->tag);
	h->data = fi_xpu_shm_ldr(&m->data);
	h->flags = fi_xpu_shm_ldr(&m->flags);
	h->src_nonce = 0; /* attributed by fi_xpu_shm_msg_source */
	h->src_ep = fi_xpu_shm_ldr(&m->src_ep);
	h->src_conn = fi_xpu_shm_ldr(&m->src_conn);
	h->src_region = fi_xpu_shm_ldr(&m->src_region);
	h->src_off = fi_xpu_shm_ldr(&m->src_off);
	h->src_gen = fi_xpu_shm_ldr(&m->src_gen);
	h->stamp = fi_xpu_shm_ldr(&m->stamp);
	h->pstamp = fi_xpu_shm_ldr(&m->pstamp);
}

/* The key the message whose header copy is `h` was stamped under: that
 * of the connection it names, or, for a departed peer's entry after its
 * id went to another one, the key that peer had. NULL when there is none.
 * `*prev` says which. */
FI_XPU_FUNC const uint64_t *fi_xpu_shm_msg_key(const struct fi_xpu_shm_ep_dev *ep,
					       const struct fi_xpu_shm_msg_seen *h, int *prev)
{
	const struct fi_xpu_shm_peer_map *map = fi_xpu_shm_conn_map(ep->ctx, h->src_conn);
	if (!map || (h->src_ep >> 32))
		return FI_XPU_I_NULL;
	*prev = h->src_gen != fi_xpu_shm_ld(&map->gen);
	if (*prev && h->src_gen != fi_xpu_shm_ld(&map->prev_gen))
		return FI_XPU_I_NULL;
	return *prev ? map->prev_key : map->key;
}

/* Attributes the arrived message whose header copy is `h`, at inbox
 * position `pos`: 0 when the connection it names made its stamp, its
 * source then that connection's attested peer (and h->seq the position's
 * own, pos + 1); -1 when it is refused. */
FI_XPU_FUNC int fi_xpu_shm_msg_source(const struct fi_xpu_shm_ep_dev *ep, uint64_t pos,
				      struct fi_xpu_shm_msg_seen *h)
{
	const struct fi_xpu_shm_peer_map *map = fi_xpu_shm_conn_map(ep->ctx, h->src_conn);
	const uint64_t *key;
	struct fi_xpu_shm_msg_id id;
	int prev = 0;
	key = fi_xpu_shm_msg_key(ep, h, &prev);
	if (!key)
		return -1;
	id.pos = pos;
	id.ep_id = ep->ep_id;
	id.src_ep = h->src_ep;
	id.flags = h->flags;
	id.len = h->len;
	id.tag = h->tag;
	id.data = h->data;
	id.src_region = h->src_region;
	id.src_off = h->src_off;
	if (fi_xpu_shm_msg_stamp(key, &id) != h->stamp)
		return -1;
	h->seq = pos + 1;
	h->src_nonce = fi_xpu_shm_ld(prev ? &map->prev_nonce : &map->nonce);
	return 0;
}

FI_XPU_FUNC int fi_xpu_shm_matches(const struct fi_xpu_shm_posted *p,
				   const struct fi_xpu_shm_msg_seen *m)
{
	if ((p->flags & FI_TAGGED) != (m->flags & FI_TAGGED))
		return 0;
	if ((p->flags & FI_XPU_SHM_POSTED_DIRECTED) &&
	    (m->src_nonce != p->src_nonce || m->src_ep != p->src_ep))
		return 0;
	if (!(p->flags & FI_TAGGED))
		return 1;
	return ((m->tag ^ p->tag) & ~p->ignore) == 0;
}

/* Completes receive `p`, which holds the message's length, tag, data,
 * flags and source by now, with `n` bytes delivered. */
FI_XPU_FUNC void fi_xpu_shm_rx_complete(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_posted *p,
					uint64_t n, int err)
{
	struct fi_xpu_shm_cqe_in in = fi_xpu_shm_cqe_zero();
	uint64_t *c = FI_XPU_SHM_P(uint64_t, ep->cntr[FI_XPU_SHM_CNTR_RECV]);
	if (err == 0 && p->mlen > p->len)
		err = -FI_ETRUNC;
	in.flags = FI_RECV | ((p->flags & FI_TAGGED) ? FI_TAGGED : FI_MSG) |
		   (p->flags & FI_REMOTE_CQ_DATA);
	in.context = p->context;
	in.len = err && err != -FI_ETRUNC ? 0 : n;
	in.buf = p->buf;
	in.data = p->data;
	in.tag = p->tag;
	in.olen = err == -FI_ETRUNC ? p->mlen - p->len : 0;
	in.err = err;
	in.src_nonce = p->src_nonce;
	in.src_ep = p->src_ep;
	fi_xpu_arch_fence(FI_XPU_ARCH_RELEASE, FI_XPU_SHM_SYS);
	if (c)
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_shm_add(err ? c + 1 : c, 1));
	(void)fi_xpu_shm_cq_push(ep->rx_cq, &in);
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&p->state, FI_XPU_SHM_POSTED_FREE));
}

/* Ends the streamed or rendezvous message in slot `m` at position `pos`
 * as failed: the stamped word tells its sender (under the connection's
 * `key`, none when unknown) that its lane or buffer is free. */
FI_XPU_FUNC void fi_xpu_shm_flow_fail(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_msg *m,
				      const uint64_t *key, uint64_t pos)
{
	/* The state first: once the sender sees the stamped word it marks
	 * the slot consumed, which no later store of ours may undo (the
	 * inbox would never be retired past it). */
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_RDV_FAILED));
	if (key)
		(void)fi_xpu_shm_flow_put(&m->consumed, &m->cstamp, key, pos, ep->ep_id, 0,
					  FI_XPU_SHM_FLOW_FAILED);
}

/* Takes what the sender has staged for the streamed message of receive
 * `p`; completes the receive after the last byte or when the sender is
 * gone. Only a produced position with the sender's stamp counts; every
 * such value is bounded before use. */
FI_XPU_FUNC void fi_xpu_shm_stream_rx(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_posted *p)
{
	struct fi_xpu_shm_msg *m = FI_XPU_SHM_P(struct fi_xpu_shm_msg, p->slot);
	const struct fi_xpu_shm_peer_map *map = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, p->map);
	const uint64_t *key = fi_xpu_shm_ld(&map->gen) == p->seq ? map->key : FI_XPU_I_NULL;
	uint64_t produced, pst, done = p->done;
	if (fi_xpu_shm_ld(&m->state) != FI_XPU_SHM_SLOT_STREAMING) {
		/* Someone rewrote the slot: its bytes are lost. */
		fi_xpu_shm_flow_fail(ep, m, key, p->pos);
		fi_xpu_shm_rx_complete(ep, p, 0, -FI_EIO);
		return;
	}
	produced = fi_xpu_shm_ld(&m->produced);
	pst = fi_xpu_shm_ld(&m->pstamp);
	if (key && produced != done &&
	    pst == fi_xpu_shm_flow_stamp(key, p->pos, ep->ep_id, produced, FI_XPU_SHM_FLOW_PRODUCED)) {
		if (produced > p->mlen || (produced > done && produced - done > FI_XPU_SHM_STAGE_LANE_SIZE)) {
			/* Stamped by the sender, yet impossible: its
			 * stream is broken. */
			fi_xpu_shm_flow_fail(ep, m, key, p->pos);
			fi_xpu_shm_rx_complete(ep, p, 0, -FI_EIO);
			return;
		}
		if (produced > done) {
			/* Bytes past the posted buffer are taken and dropped,
			 * so that the sender can finish; the receive reports
			 * FI_ETRUNC. */
			uint64_t lo = done < p->len ? done : p->len;
			uint64_t hi = produced < p->len ? produced : p->len;
			if (hi > lo)
				fi_xpu_shm_lane_copy(FI_XPU_SHM_P(unsigned char, p->stage), lo,
						     FI_XPU_SHM_P(unsigned char, p->buf) + lo, hi - lo,
						     0);
			p->done = produced;
			/* The slot's state before the last word: once the
			 * sender sees it, it marks the slot consumed. */
			if (produced == p->mlen)
				FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG,
						 fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_RDV_DONE));
			p->cst = fi_xpu_shm_flow_put(&m->consumed, &m->cstamp, key, p->pos, ep->ep_id,
						     produced, FI_XPU_SHM_FLOW_CONSUMED);
		}
		/* A smaller one is an old word replayed: ignored. */
	} else if (key && p->done && (fi_xpu_shm_ldr(&m->consumed) != p->done ||
				      fi_xpu_shm_ldr(&m->cstamp) != p->cst)) {
		/* Our word was overwritten: published again, so that the
		 * sender is not stalled by whoever wrote it. */
		p->cst = fi_xpu_shm_flow_put(&m->consumed, &m->cstamp, key, p->pos, ep->ep_id, p->done,
					     FI_XPU_SHM_FLOW_CONSUMED);
	}
	if (p->done == p->mlen) {
		fi_xpu_shm_rx_complete(ep, p, p->mlen < p->len ? p->mlen : p->len, 0);
	} else if (!key || !fi_xpu_shm_peer_alive(map)) {
		/* Nobody will finish or retire the slot: the sender is gone. */
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_CONSUMED));
		fi_xpu_shm_rx_complete(ep, p, 0, -FI_ECONNRESET);
	}
}

/* Delivers message `m` into posted receive `p`: at once for eager and
 * rendezvous messages, by `fi_xpu_shm_stream_rx` for streamed ones. */
FI_XPU_NOINLINE_FUNC void fi_xpu_shm_deliver(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_posted *p,
				    struct fi_xpu_shm_msg *m, const struct fi_xpu_shm_msg_seen *h)
{
	uint64_t mflags = h->flags, n, state = FI_XPU_SHM_SLOT_CONSUMED;
	int err = 0;
	p->mlen = h->len;
	p->tag = h->tag;
	p->data = h->data;
	p->src_nonce = h->src_nonce;
	p->src_ep = h->src_ep;
	p->flags = (mflags & (FI_TAGGED | FI_REMOTE_CQ_DATA));
	n = p->mlen < p->len ? p->mlen : p->len;
	if (mflags & (FI_XPU_SHM_MSG_RDV | FI_XPU_SHM_MSG_STREAM)) {
		uint64_t gen = h->src_gen, size = 0, base, off = h->src_off;
		const struct fi_xpu_shm_peer_map *map = fi_xpu_shm_src_map(ep, h->src_conn, gen);
		uint64_t need = (mflags & FI_XPU_SHM_MSG_STREAM) ? FI_XPU_SHM_STAGE_LANE_SIZE : n;
		base = fi_xpu_shm_region(map, h->src_region, &size);
		if (!fi_xpu_shm_peer_alive(map)) {
			/* A departed sender, or one whose connection id was
			 * reused since: never read from whoever holds it now. */
			err = -FI_ECONNRESET;
		} else if (!base || off > size || need > size - off) {
			err = -FI_EIO;
			fi_xpu_shm_flow_fail(ep, m, map->key, h->seq - 1);
			fi_xpu_shm_rx_complete(ep, p, n, err);
			return;
		} else if (mflags & FI_XPU_SHM_MSG_STREAM) {
			p->slot = (uint64_t)(uintptr_t)m;
			p->map = (uint64_t)(uintptr_t)map;
			p->seq = gen; /* posting order matters no more */
			p->stage = base + off;
			p->done = 0;
			p->pos = h->seq - 1;
			p->cst = 0;
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_STREAMING));
			/* Progress takes its bytes (fi_xpu_shm_stream_rx) right
			 * after the arrivals it matched: kept out of here, the
			 * registers of both stay out of every kernel's count. */
			fi_xpu_shm_str(&ep->busy, 1);
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&p->state, FI_XPU_SHM_POSTED_ACTIVE));
			fi_xpu_shm_ring_bell(fi_xpu_shm_ep_bell(ep), FI_XPU_SHM_SYS);
			return;
		} else {
			fi_xpu_shm_copy(FI_XPU_SHM_P(void, p->buf), FI_XPU_SHM_P(const void, base + off),
					n);
			/* Taken: only this stamped word frees the sender's
			 * buffer, and the sender then marks the slot consumed,
			 * so the state goes first and nothing is stored after. */
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG,
					 fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_RDV_DONE));
			(void)fi_xpu_shm_flow_put(&m->consumed, &m->cstamp, map->key, h->seq - 1,
						  ep->ep_id, h->len, FI_XPU_SHM_FLOW_CONSUMED);
			fi_xpu_shm_rx_complete(ep, p, n, 0);
			return;
		}
	} else if (p->mlen > FI_XPU_SHM_EAGER_MAX) {
		err = -FI_EIO; /* a slot cannot hold that much: corrupt header */
	} else {
		const unsigned char *bytes = (const unsigned char *)m + FI_XPU_SHM_MSG_HDR;
		const uint64_t *key;
		int prev = 0;
		fi_xpu_shm_copy(FI_XPU_SHM_P(void, p->buf), bytes, n);
		/* Stamped again over what was copied: bytes a peer changed in
		 * the slot are an error, never a message. */
		key = fi_xpu_shm_msg_key(ep, h, &prev);
		if (!key || fi_xpu_shm_bytes_stamp(key, h->seq - 1, FI_XPU_SHM_P(const void, p->buf),
						   n, bytes, p->mlen) != h->pstamp)
			err = -FI_EIO;
	}
	fi_xpu_shm_rx_complete(ep, p, n, err);
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&m->state, state));
}

/* What the receiver of send `q` (lock held) said in the flow word of
 * slot `m`: 1 once it took every byte, -1 when it failed the transfer, 0
 * otherwise, with `q->acked` the most it stamped as consumed so far. A
 * word without the receiver's stamp, or a smaller position replayed, is
 * ignored: no other peer can end the send or free its lane. */
FI_XPU_FUNC int fi_xpu_shm_rdv_verdict(struct fi_xpu_shm_rdv *q, struct fi_xpu_shm_msg *m)
{
	uint64_t cs = fi_xpu_shm_ld(&m->cstamp), c, most;
	if (cs != q->cseen) {
		c = fi_xpu_shm_ld(&m->consumed);
		/* A receiver never takes more than was staged. */
		most = q->kind == FI_XPU_SHM_RDV_REG ? q->len : q->sent;
		if (cs == fi_xpu_shm_flow_stamp(q->key, q->pos, q->rep, c, FI_XPU_SHM_FLOW_CONSUMED)) {
			q->cseen = cs;
			if (c > q->acked && c <= most)
				q->acked = c;
		} else if (c == 0 &&
			   cs == fi_xpu_shm_flow_stamp(q->key, q->pos, q->rep, 0, FI_XPU_SHM_FLOW_FAILED)) {
			return -1;
		}
	}
	return q->acked == q->len ? 1 : 0;
}

/* Feeds streamed send `q` (lock held): stages as much as the lane has
 * room for behind what the receiver stamped as consumed, publishes it
 * with its stamp, and reports the send once every byte is staged. */
FI_XPU_FUNC void fi_xpu_shm_stream_tx(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_rdv *q,
				      struct fi_xpu_shm_msg *m)
{
	uint64_t room, n;
	if (q->sent && (fi_xpu_shm_ldr(&m->produced) != q->sent || fi_xpu_shm_ldr(&m->pstamp) != q->pst))
		/* Our word was overwritten: published again, so that the
		 * receiver is not stalled by whoever wrote it. */
		q->pst = fi_xpu_shm_flow_put(&m->produced, &m->pstamp, q->key, q->pos, q->rep, q->sent,
					     FI_XPU_SHM_FLOW_PRODUCED);
	if (q->kind != FI_XPU_SHM_RDV_STREAM)
		return;
	room = FI_XPU_SHM_STAGE_LANE_SIZE - (q->sent - q->acked);
	n = q->len - q->sent < room ? q->len - q->sent : room;
	if (n) {
		fi_xpu_shm_lane_copy(fi_xpu_shm_lane(ep, q->lane), q->sent,
				     FI_XPU_SHM_P(unsigned char, q->buf) + q->sent, n, 1);
		fi_xpu_arch_fence(FI_XPU_ARCH_RELEASE, FI_XPU_SHM_SYS);
		q->sent += n;
		q->pst = fi_xpu_shm_flow_put(&m->produced, &m->pstamp, q->key, q->pos, q->rep, q->sent,
					     FI_XPU_SHM_FLOW_PRODUCED);
	}
	if (q->sent == q->len) {
		/* The buffer is no longer needed: the send is complete. */
		fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_SEND, q->flags, FI_XPU_SHM_P(void, q->context),
				    q->len, 0);
		q->kind = FI_XPU_SHM_RDV_STAGED;
	}
}

/* Device-side progress of one endpoint: matches arrived messages against
 * posted receives (in arrival and posting order), moves streamed messages
 * in both directions, retires consumed slots, and completes sends the
 * receivers have finished with. */
FI_XPU_FUNC void fi_xpu_shm_progress(struct fi_xpu_shm_ep_dev *ep)
{
	struct fi_xpu_shm_ep_block *b;
	uint64_t pos, head, tail;
	int i, busy = 0;
	if (!ep)
		return;
	b = FI_XPU_SHM_P(struct fi_xpu_shm_ep_block, ep->block);
	if (fi_xpu_shm_ep_idle(ep) || !fi_xpu_shm_lock(ep, 0))
		return;
	tail = fi_xpu_shm_ld(&b->tail);
	head = fi_xpu_shm_ld(&b->head);
	/* Senders move head; never scan more than the inbox holds. */
	if (head - tail > FI_XPU_SHM_INBOX_SLOTS)
		head = tail + FI_XPU_SHM_INBOX_SLOTS;
	for (pos = tail; pos != head; pos++) {
		struct fi_xpu_shm_msg *m = fi_xpu_shm_slot(b, pos);
		struct fi_xpu_shm_msg_seen h;
		struct fi_xpu_shm_posted *best = FI_XPU_I_NULL;
		if (fi_xpu_shm_ld(&m->seq) != pos + 1)
			break;
		if (fi_xpu_shm_ld(&m->state) != FI_XPU_SHM_SLOT_NEW)
			continue;
		fi_xpu_shm_msg_read(m, &h);
		if (fi_xpu_shm_msg_source(ep, pos, &h) != 0) {
			/* Not sent by the peer it names: never delivered. If
			 * that peer has a pull or stream waiting here (one a
			 * third peer altered), it learns it failed. */
			int prev = 0;
			if (h.flags & (FI_XPU_SHM_MSG_RDV | FI_XPU_SHM_MSG_STREAM))
				fi_xpu_shm_flow_fail(ep, m, fi_xpu_shm_msg_key(ep, &h, &prev), pos);
			else
				FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG,
						 fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_CONSUMED));
			continue;
		}
		for (i = 0; i < FI_XPU_SHM_MAX_POSTED; i++) {
			struct fi_xpu_shm_posted *p = &ep->posted[i];
			if (p->state == FI_XPU_SHM_POSTED_READY && fi_xpu_shm_matches(p, &h) &&
			    (!best || p->seq < best->seq))
				best = p;
		}
		if (best)
			fi_xpu_shm_deliver(ep, best, m, &h);
	}
	for (i = 0; i < FI_XPU_SHM_MAX_POSTED; i++)
		if (ep->posted[i].state == FI_XPU_SHM_POSTED_ACTIVE) {
			fi_xpu_shm_stream_rx(ep, &ep->posted[i]);
			busy |= ep->posted[i].state == FI_XPU_SHM_POSTED_ACTIVE;
		}
	/* Retire the prefix the sender no longer needs. */
	for (;;) {
		struct fi_xpu_shm_msg *m = fi_xpu_shm_slot(b, tail);
		if (tail == head || fi_xpu_shm_ld(&m->seq) != tail + 1 ||
		    fi_xpu_shm_ld(&m->state) != FI_XPU_SHM_SLOT_CONSUMED)
			break;
		tail++;
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&b->tail, tail));
	}
	for (i = 0; i < FI_XPU_SHM_MAX_POSTED; i++) {
		struct fi_xpu_shm_rdv *r = &ep->rdv[i];
		struct fi_xpu_shm_msg *m = FI_XPU_SHM_P(struct fi_xpu_shm_msg, fi_xpu_shm_ld(&r->slot));
		const struct fi_xpu_shm_peer_map *map =
			FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, r->map);
		int v;
		if (!m)
			continue;
		if (!fi_xpu_shm_peer_alive(map) || fi_xpu_shm_ld(&map->gen) != r->gen) {
			/* The receiver departed: nothing it left in its slot will
			 * ever change, so the send ends here (a streamed one
			 * already reported stays reported). */
			if (r->kind != FI_XPU_SHM_RDV_STAGED)
				fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_SEND, r->flags,
						    FI_XPU_SHM_P(void, r->context), r->len,
						    -FI_ECONNRESET);
			if (r->kind != FI_XPU_SHM_RDV_REG)
				ep->lanes &= ~(1ULL << r->lane);
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&r->slot, 0));
			continue;
		}
		v = fi_xpu_shm_rdv_verdict(r, m);
		if (v) {
			/* A streamed send was reported when fully staged. */
			if (r->kind != FI_XPU_SHM_RDV_STAGED)
				fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_SEND, r->flags,
						    FI_XPU_SHM_P(void, r->context), r->len,
						    v > 0 && r->kind == FI_XPU_SHM_RDV_REG ? 0 : -FI_EIO);
			if (r->kind != FI_XPU_SHM_RDV_REG)
				ep->lanes &= ~(1ULL << r->lane);
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&r->slot, 0));
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_CONSUMED));
		} else {
			if (r->kind != FI_XPU_SHM_RDV_REG)
				fi_xpu_shm_stream_tx(ep, r, m);
			busy = 1;
		}
	}
	/* Under the lock, which every setter holds: none is lost. */
	if (!busy)
		fi_xpu_shm_str(&ep->busy, 0);
	fi_xpu_shm_unlock(ep);
}

FI_XPU_FUNC int fi_xpu_shm_recv_any(const struct fid_xpu_ep *hep, void *buf, size_t len,
				    const void *src_addr, uint64_t tag, uint64_t ignore,
				    uint64_t flags, void *context, int scope)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	const struct fi_xpu_shm_peer_addr *src = FI_XPU_I_NULL;
	int64_t rc = 0;
	int i;
	FI_XPU_SHM_SCOPE_ENTER(scope, rank);
	if (!ep || (!buf && len))
		return -FI_EINVAL;
	if (src_addr) {
		/* Directed receive: the raw address of the one source. */
		src = fi_xpu_shm_peer(ep, *(const uint64_t *)src_addr);
		if (!src)
			return -FI_EINVAL;
	}
	if (rank == 0) {
		fi_xpu_shm_lock(ep, 1);
		for (i = 0; i < FI_XPU_SHM_MAX_POSTED; i++)
			if (ep->posted[i].state == FI_XPU_SHM_POSTED_FREE)
				break;
		if (i == FI_XPU_SHM_MAX_POSTED) {
			rc = -FI_EAGAIN;
		} else {
			struct fi_xpu_shm_posted *p = &ep->posted[i];
			p->buf = (uint64_t)(uintptr_t)buf;
			p->len = len;
			p->tag = tag;
			p->ignore = ignore;
			p->context = (uint64_t)(uintptr_t)context;
			p->flags = (flags & FI_TAGGED) | (src ? FI_XPU_SHM_POSTED_DIRECTED : 0);
			p->src_nonce = src ? src->nonce : 0;
			p->src_ep = src ? src->ep_id : 0;
			p->seq = ++ep->post_seq;
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&p->state, FI_XPU_SHM_POSTED_READY));
		}
		fi_xpu_shm_unlock(ep);
		if (rc == 0)
			fi_xpu_shm_progress(ep);
	}
	rc = fi_xpu_shm_bcast(scope, rc);
	return (int)rc;
}

/* ---- CQ reads ----------------------------------------------------------- */
FI_XPU_FUNC uint64_t fi_xpu_shm_src(const struct fi_xpu_shm_cq_dev *q, uint64_t nonce, uint64_t ep)
{
	uint64_t i, j;
	for (i = 0; i < q->nprog; i++) {
		const struct fi_xpu_shm_ep_dev *e = FI_XPU_SHM_P(const struct fi_xpu_shm_ep_dev, q->prog[i]);
		const struct fi_xpu_shm_av_ent *t = FI_XPU_SHM_P(const struct fi_xpu_shm_av_ent, e->av_tab);
		for (j = 0; t && j < e->av_count; j++)
			if (fi_xpu_shm_ldr(&t[j].ep_id) == ep && fi_xpu_shm_ldr(&t[j].nonce) == nonce)
				return j;
	}
	return FI_ADDR_NOTAVAIL;
}

/* Whether a CQ read would find nothing: no endpoint it progresses has an
 * arrival or a transfer under way (fi_xpu_shm_ep_idle), and neither its
 * own ring nor the ring peers push remote completions into has an entry or
 * an unreported overflow. Relaxed loads only, no fence, no lock, no
 * atomic: what an empty poll costs, inlined into the caller's loop, while
 * the read itself (fi_xpu_shm_cq_read_work) stays out of line. */
FI_XPU_FUNC int fi_xpu_shm_cq_idle(const struct fi_xpu_shm_cq_dev *q)
{
	struct fi_xpu_shm_cq_ring *r = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, q->ring);
	struct fi_xpu_shm_cq_ring *rr = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, fi_xpu_shm_poll(&q->rring));
	uint64_t i, t;
	for (i = 0; i < q->nprog && i < FI_XPU_SHM_MAX_PROGRESS; i++)
		if (!fi_xpu_shm_ep_idle(FI_XPU_SHM_P(const struct fi_xpu_shm_ep_dev, q->prog[i])))
			return 0;
	t = fi_xpu_shm_poll(&r->tail);
	if (fi_xpu_shm_poll(&fi_xpu_shm_ring_entry(r, q->size, t)->seq) == t + 1 ||
	    fi_xpu_shm_poll(&r->overflow) != fi_xpu_shm_poll(&r->overflow_seen))
		return 0;
	if (!rr)
		return 1;
	t = fi_xpu_shm_poll(&q->rtail);
	return fi_xpu_shm_poll(&fi_xpu_shm_ring_entry(rr, q->size, t)->seq) != t + 1 &&
	       fi_xpu_shm_poll(&rr->overflow) == fi_xpu_shm_poll(&q->rseen);
}

/* The leader's CQ read once fi_xpu_shm_cq_idle saw something. */
FI_XPU_POLL_WORK_FUNC int64_t fi_xpu_shm_cq_read_work(struct fi_xpu_shm_cq_dev *q, void *buf,
						     size_t count, uint64_t *src_addr)
{
	struct fi_xpu_shm_cq_ring *r;
	size_t n = 0, esz;
	uint64_t i;
	int64_t rc = 0;
	{
		r = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, q->ring);
		esz = q->format == FI_CQ_FORMAT_CONTEXT ? sizeof(struct fi_cq_entry)
		    : q->format == FI_CQ_FORMAT_MSG    ? sizeof(struct fi_cq_msg_entry)
		    : q->format == FI_CQ_FORMAT_DATA   ? sizeof(struct fi_cq_data_entry)
						       : sizeof(struct fi_cq_tagged_entry);
		for (i = 0; i < q->nprog; i++)
			fi_xpu_shm_progress(FI_XPU_SHM_P(struct fi_xpu_shm_ep_dev, q->prog[i]));
		fi_xpu_shm_cq_take_remote(q);
		fi_xpu_shm_report_overrun_rung(r, q->size, FI_XPU_SHM_P(uint64_t, q->bell));
		while (n < count) {
			uint64_t t = fi_xpu_shm_poll(&r->tail);
			struct fi_xpu_shm_cqe *e = fi_xpu_shm_ring_entry(r, q->size, t);
			struct fi_cq_tagged_entry out;
			int claimed;
			/* Two relaxed words when the ring is empty; one
			 * acquire fence for an entry. */
			if (fi_xpu_shm_poll(&e->seq) != t + 1)
				break;
			fi_xpu_shm_acq();
			if (e->is_err) {
				if (n == 0)
					rc = -FI_EAVAIL;
				break;
			}
			out.op_context = FI_XPU_SHM_P(void, e->context);
			out.flags = e->flags;
			out.len = (size_t)e->len;
			out.buf = FI_XPU_SHM_P(void, e->buf);
			out.data = e->data;
			out.tag = e->tag;
			if (src_addr)
				src_addr[n] = fi_xpu_shm_src(q, e->src_nonce, e->src_ep);
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, claimed = fi_xpu_shm_cas(&r->tail, t, t + 1));
			if (!claimed)
				continue;
			fi_xpu_shm_copy((unsigned char *)buf + n * esz, &out, esz);
			n++;
		}
		if (rc == 0)
			rc = n ? (int64_t)n : -FI_EAGAIN;
	}
	return rc;
}

/* The leader's CQ read once the bell rang since the CQ was last found
 * idle (or it has none): the handle checked, the bell read with acquire,
 * the full read; when it found nothing and the CQ is idle after it, the
 * bell's value goes to `bseen`, unless another reader or the host changed
 * that since it read `seen`. */
FI_XPU_POLL_WORK_FUNC int64_t fi_xpu_shm_cq_read_rung(const struct fid_xpu_cq *hcq, void *buf,
						     size_t count, uint64_t *src_addr,
						     uint64_t seen)
{
	struct fi_xpu_shm_cq_dev *q = fi_xpu_shm_cq(hcq);
	uint64_t *bell, rung = 0;
	int64_t rc;
	int idle;
	if (!q || (!buf && count))
		return -FI_EINVAL;
	bell = FI_XPU_SHM_P(uint64_t, q->bell);
	if (bell)
		rung = fi_xpu_shm_ld(bell);
	idle = fi_xpu_shm_cq_idle(q);
	rc = idle ? -FI_EAGAIN : fi_xpu_shm_cq_read_work(q, buf, count, src_addr);
	if (bell && rc == -FI_EAGAIN && (idle || fi_xpu_shm_cq_idle(q)))
		(void)fi_xpu_shm_cas(&q->bseen, seen, rung);
	return rc;
}

/* A poll of a CQ whose bell did not ring since a read found it idle polls
 * two words, the bell and `bseen`, and returns -FI_EAGAIN. Before them it
 * reads, as plain loads, the handle's pointer to the CQ's block, the
 * block's validity word (a handle of another class, or a forged one, must
 * not lead to a load through whatever its block holds where a CQ keeps
 * its bell; only the host writes that word, at open and close) and the
 * bell's address. A closed CQ's `bseen` never matches: the read above
 * checks the validity word as a poll and reports it. */
FI_XPU_FUNC int64_t fi_xpu_shm_cq_read_any(const struct fid_xpu_cq *hcq, void *buf, size_t count,
					   uint64_t *src_addr, int scope)
{
	const struct fi_xpu_shm_cq_dev *q;
	const uint64_t *bell;
	uint64_t seen = 0;
	int64_t rc = 0;
	FI_XPU_SHM_SCOPE_ENTER(scope, rank);
	if (rank == 0) {
		q = hcq ? FI_XPU_SHM_P(const struct fi_xpu_shm_cq_dev, hcq->fid.prov_ctx)
			: FI_XPU_I_NULL;
		bell = q && q->magic == FI_XPU_HANDLE_WORD(FI_XPU_HANDLE_CQ, FI_XPU_HANDLE_LIVE)
			       ? FI_XPU_SHM_P(const uint64_t, q->bell)
			       : FI_XPU_I_NULL;
		if (bell && (buf || !count) &&
		    (seen = fi_xpu_shm_poll(&q->bseen)) == fi_xpu_shm_poll(bell))
			rc = -FI_EAGAIN;
		else
			rc = fi_xpu_shm_cq_read_rung(hcq, buf, count, src_addr, seen);
	}
	return fi_xpu_shm_bcast(scope, rc);
}

FI_XPU_FUNC int64_t fi_xpu_shm_cq_readerr_any(const struct fid_xpu_cq *hcq,
					      struct fi_cq_err_entry *buf, uint64_t flags, int scope)
{
	struct fi_xpu_shm_cq_dev *q;
	struct fi_xpu_shm_cq_ring *r;
	int64_t rc = -FI_EAGAIN;
	FI_XPU_SHM_SCOPE_ENTER(scope, rank);
	(void)flags;
	q = fi_xpu_shm_cq(hcq);
	if (!q || !buf)
		return -FI_EINVAL;
	if (rank == 0) {
		r = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, q->ring);
		fi_xpu_shm_cq_take_remote(q);
		fi_xpu_shm_report_overrun_rung(r, q->size, FI_XPU_SHM_P(uint64_t, q->bell));
		for (;;) {
			uint64_t t = fi_xpu_shm_ld(&r->tail);
			struct fi_xpu_shm_cqe *e = fi_xpu_shm_ring_entry(r, q->size, t);
			struct fi_cq_err_entry out;
			int claimed;
			if (fi_xpu_shm_ld(&e->seq) != t + 1 || !e->is_err)
				break;
			out.op_context = FI_XPU_SHM_P(void, e->context);
			out.flags = e->flags;
			out.len = (size_t)e->len;
			out.buf = FI_XPU_SHM_P(void, e->buf);
			out.data = e->data;
			out.tag = e->tag;
			out.olen = (size_t)e->olen;
			/* libfabric reports a positive errno here. */
			out.err = (int)-e->err;
			out.prov_errno = (int)e->err;
			out.err_data = FI_XPU_I_NULL;
			out.err_data_size = 0;
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, claimed = fi_xpu_shm_cas(&r->tail, t, t + 1));
			if (!claimed)
				continue;
			*buf = out;
			rc = 1;
			break;
		}
	}
	return fi_xpu_shm_bcast(scope, rc);
}

/* ---- put with signal, fence, quiet, direct pointers ------------------- */
/* Copies the data of a put-with-signal: the copy of fi_xpu_coop_copy for
 * a group of one (16-byte units, four in flight, on GPUs; memcpy on CPU
 * threads). Under the testing-only delay it places the data as a slow,
 * reordering transport would: 64-byte pieces, the last one first,
 * `delay_ns` apart, so that a signal raised before the copy ended is seen
 * with data missing. */
FI_XPU_FUNC void fi_xpu_shm_place(unsigned char *dst, const unsigned char *src, size_t len,
				  uint64_t delay_ns)
{
	size_t n;
	if (!delay_ns) {
		fi_xpu_i_coop_copy_share(dst, src, len, 0, 1);
		return;
	}
	for (n = (len + 63) / 64; n-- > 0;) {
		size_t lo = n * 64, hi = lo + 64 < len ? lo + 64 : len;
		uint64_t t0 = fi_xpu_arch_clock_ns();
		while (fi_xpu_arch_clock_ns() - t0 < delay_ns)
			fi_xpu_arch_pause();
		fi_xpu_shm_copy(dst + lo, src + lo, hi - lo);
	}
}

/* One work item's put-with-signal: the data, a fence at the peer's scope
 * (fi_xpu_shm_peer_addr.scope), then the signal word, so that a peer that sees the signal sees the data. Checked
 * like a write; a refused access (data or signal word) is an error
 * completion and touches nothing. */
#ifndef FI_XPU_I_TEST_SIG_ORDER /* testing only: tests/weak_order.rs weakens it */
#define FI_XPU_I_TEST_SIG_ORDER(order, mscope) order, mscope
#endif
FI_XPU_FUNC int fi_xpu_shm_put_signal_item(struct fid_xpu_ep *hep, const void *buf, size_t len,
					   const void *dest_addr, uint64_t addr, uint64_t key,
					   uint64_t sig_addr, uint64_t sig_key, uint64_t signal,
					   int sig_op, void *context)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	unsigned char *mem = FI_XPU_I_NULL, *sig = FI_XPU_I_NULL;
	int rc;
	if (!ep || (!buf && len) || !dest_addr)
		return -FI_EINVAL;
	/* The data's registration and the signal word's, each through the
	 * resolve table (fi_xpu_shm_resolve). */
	rc = fi_xpu_shm_resolve(ep, dest_addr, addr, len, key, FI_REMOTE_WRITE, &t, &mem);
	if (rc == 0)
		rc = fi_xpu_shm_resolve(ep, dest_addr, sig_addr, 8, sig_key, FI_REMOTE_WRITE, &t, &sig);
	if (rc == 0 && ((uintptr_t)sig & 7) != 0)
		rc = -FI_EINVAL;
	if (t.info && (rc == -FI_EACCES || rc == -FI_EINVAL)) {
		fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_WRITE, FI_WRITE | FI_RMA, context, len, rc);
		return 0;
	}
	if (rc)
		return rc;
	fi_xpu_shm_place(mem, (const unsigned char *)buf, len, ep->test_delay_ns);
	fi_xpu_arch_fence(FI_XPU_I_TEST_SIG_ORDER(FI_XPU_ARCH_SEQ_CST, t.ms));
	if (sig_op == FI_XPU_SIGNAL_SET)
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_SIGNAL,
				 fi_xpu_arch_store_u64((uint64_t *)(void *)sig, signal,
						       FI_XPU_I_TEST_SIG_ORDER(FI_XPU_ARCH_RELEASE, t.ms)));
	else
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_SIGNAL,
				 (void)fi_xpu_arch_fetch_add_u64((uint64_t *)(void *)sig, signal,
								 FI_XPU_ARCH_ACQ_REL, t.ms));
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_shm_add(fi_xpu_shm_tcntr(&t, &t.info->rem_write_cntr), 1));
	fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_WRITE, FI_WRITE | FI_RMA, context, len, 0);
	return 0;
}

/* Where `len` bytes at `addr` of the peer's registration `key` are mapped
 * here, or NULL: an unknown or departed peer, a key that does not cover
 * them or lacks remote read and write access. */
FI_XPU_FUNC void *fi_xpu_shm_peer_ptr_item(struct fid_xpu_ep *hep, const void *dest_addr,
					   uint64_t addr, uint64_t key, size_t len)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	unsigned char *mem = FI_XPU_I_NULL;
	if (!ep || fi_xpu_shm_target_of(ep, dest_addr, &t) != 0 ||
	    fi_xpu_shm_rkey(&t, addr, len, key, FI_REMOTE_READ | FI_REMOTE_WRITE, &mem) != 0)
		return FI_XPU_I_NULL;
	return mem;
}

/* ---- the provider entry points of fi_xpu_device.h -----------------------
 * Every member of the scope group issues its own operation with its own
 * arguments (the work-item path above) and gets its own status; the group
 * leaves together, once every member's operation was issued. CQ reads and
 * flushes have one shared destination: the leader serves them and the
 * group gets its result. The cooperative single transfers
 * (fi_xpu_coop_write & co.) run the group paths above: one operation with
 * the leader's arguments, its copy shared by the members. */
#define FI_XPU_SHM_EACH_ITEM(scope, call, expr)                                          \
	do {                                                                             \
		struct fi_xpu_group g_;                                                  \
		int rc_ = fi_xpu_group_enter(&g_, scope, call);                          \
		if (rc_)                                                                 \
			return rc_;                                                      \
		rc_ = (expr);                                                            \
		return fi_xpu_group_leave(&g_, rc_);                                     \
	} while (0)

/* As FI_XPU_SHM_EACH_ITEM, with the common argument checks of
 * fi_xpu/device_check.h first: a refused member still takes part. */
#define FI_XPU_SHM_EACH_CHECKED(scope, call, check, expr)                                \
	do {                                                                             \
		struct fi_xpu_group g_;                                                  \
		int rc_ = fi_xpu_group_enter(&g_, scope, call);                          \
		if (rc_)                                                                 \
			return rc_;                                                      \
		rc_ = (check);                                                           \
		if (!rc_)                                                                \
			rc_ = (expr);                                                    \
		return fi_xpu_group_leave(&g_, rc_);                                     \
	} while (0)

#define FI_XPU_SHM_COOP(scope, call, expr)                                               \
	do {                                                                             \
		struct fi_xpu_group g_;                                                  \
		int rc_ = fi_xpu_group_enter(&g_, scope, call);                          \
		if (rc_)                                                                 \
			return rc_;                                                      \
		return (expr);                                                           \
	} while (0)

FI_XPU_FUNC int fi_xpu_write_shm(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, void *dest_addr, uint64_t addr, uint64_t key,
				 void *context, uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_write", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_WRITE_FLAGS),
			     fi_xpu_shm_rma(ep, 1, (void *)(uintptr_t)buf, len, dest_addr, addr, key,
					    data, flags, context, FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_read_shm(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				void *src_addr, uint64_t addr, uint64_t key, void *context,
				uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_read", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_READ_FLAGS),
			     fi_xpu_shm_rma(ep, 0, buf, len, src_addr, addr, key, 0,
					    flags & ~FI_REMOTE_CQ_DATA, context, FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_send_shm(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				uint64_t data, void *dest_addr, void *context, uint64_t flags,
				int scope)
{
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_send", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_SEND_FLAGS),
			     fi_xpu_shm_send_any(ep, buf, len, desc, dest_addr, 0, data,
						 flags & ~FI_TAGGED, context, FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_tsend_shm(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, void *dest_addr, uint64_t tag, void *context,
				 uint64_t flags, int scope)
{
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_tsend", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_SEND_FLAGS),
			     fi_xpu_shm_send_any(ep, buf, len, desc, dest_addr, tag, data,
						 flags | FI_TAGGED, context, FI_XPU_WORK_ITEM));
}

/* A NULL src_addr matches any source; otherwise only messages from that
 * raw address (FI_DIRECTED_RECV semantics). */
FI_XPU_FUNC int fi_xpu_recv_shm(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				void *src_addr, void *context, uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_recv", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_RECV_FLAGS),
			     fi_xpu_shm_recv_any(ep, buf, len, src_addr, 0, 0, flags & ~FI_TAGGED,
						 context, FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_trecv_shm(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				 void *src_addr, uint64_t tag, uint64_t ignore, void *context,
				 uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_trecv", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_RECV_FLAGS),
			     fi_xpu_shm_recv_any(ep, buf, len, src_addr, tag, ignore,
						 flags | FI_TAGGED, context, FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_atomic_shm(struct fid_xpu_ep *ep, const void *buf, size_t count,
				  void *desc, void *dest_addr, uint64_t addr, uint64_t key,
				  int datatype, int op, void *context,
				  uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_atomic", fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_ATOMIC_FLAGS, count, addr, (int)datatype, 0),
			     op == FI_ATOMIC_READ || (op >= FI_CSWAP && op <= FI_MSWAP)
				     ? -FI_EINVAL
				     : fi_xpu_shm_atomic_any(ep, buf, count, FI_XPU_I_NULL,
							     FI_XPU_I_NULL, dest_addr, addr, key,
							     (int)datatype, (int)op, flags, context,
							     FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_fetch_atomic_shm(struct fid_xpu_ep *ep, const void *buf, size_t count,
					void *desc, void *result, void *result_desc,
					void *dest_addr, uint64_t addr, uint64_t key,
					int datatype, int op, void *context,
					uint64_t flags, int scope)
{
	(void)desc;
	(void)result_desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_fetch_atomic", fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count, addr, (int)datatype, !result),
			     op >= FI_CSWAP && op <= FI_MSWAP
				     ? -FI_EINVAL
				     : fi_xpu_shm_atomic_any(ep, buf, count, FI_XPU_I_NULL, result,
							     dest_addr, addr, key, (int)datatype,
							     (int)op, flags, context,
							     FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_compare_atomic_shm(struct fid_xpu_ep *ep, const void *buf, size_t count,
					  void *desc, const void *compare, void *compare_desc,
					  void *result, void *result_desc, void *dest_addr,
					  uint64_t addr, uint64_t key, int datatype,
					  int op, void *context, uint64_t flags, int scope)
{
	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_compare_atomic", fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count, addr, (int)datatype, !result || !compare),
			     op < FI_CSWAP || op > FI_MSWAP
				     ? -FI_EINVAL
				     : fi_xpu_shm_atomic_any(ep, buf, count, compare, result,
							     dest_addr, addr, key, (int)datatype,
							     (int)op, flags, context,
							     FI_XPU_WORK_ITEM));
}

/* The cooperative single transfers: see fi_xpu_device.h. */
#define FI_XPU_DEVICE_COOP_shm ~, 1

FI_XPU_FUNC int fi_xpu_coop_write_shm(struct fid_xpu_ep *ep, const void *buf, size_t len,
				      void *desc, uint64_t data, void *dest_addr, uint64_t addr,
				      uint64_t key, void *context, uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_COOP(scope, "fi_xpu_coop_write",
			fi_xpu_shm_rma(ep, 1, (void *)(uintptr_t)buf, len, dest_addr, addr, key,
				       data, flags, context, scope));
}

FI_XPU_FUNC int fi_xpu_coop_read_shm(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				     void *src_addr, uint64_t addr, uint64_t key, void *context,
				     uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_COOP(scope, "fi_xpu_coop_read",
			fi_xpu_shm_rma(ep, 0, buf, len, src_addr, addr, key, 0,
				       flags & ~FI_REMOTE_CQ_DATA, context, scope));
}

FI_XPU_FUNC int fi_xpu_coop_send_shm(struct fid_xpu_ep *ep, const void *buf, size_t len,
				     void *desc, uint64_t data, void *dest_addr, void *context,
				     uint64_t flags, int scope)
{
	FI_XPU_SHM_COOP(scope, "fi_xpu_coop_send",
			fi_xpu_shm_send_any(ep, buf, len, desc, dest_addr, 0, data,
					    flags & ~FI_TAGGED, context, scope));
}

FI_XPU_FUNC int fi_xpu_coop_tsend_shm(struct fid_xpu_ep *ep, const void *buf, size_t len,
				      void *desc, uint64_t data, void *dest_addr, uint64_t tag,
				      void *context, uint64_t flags, int scope)
{
	FI_XPU_SHM_COOP(scope, "fi_xpu_coop_tsend",
			fi_xpu_shm_send_any(ep, buf, len, desc, dest_addr, tag, data,
					    flags | FI_TAGGED, context, scope));
}

/* Data operations are complete when they return, so a system-scope fence
 * is all that is left; progress also reports rendezvous sends the peers
 * have pulled. */
FI_XPU_FUNC int fi_xpu_flush_shm(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	struct fi_xpu_group g;
	int rc = fi_xpu_group_enter(&g, scope, "fi_xpu_flush");
	(void)flags;
	if (rc)
		return rc;
	fi_xpu_arch_fence(FI_XPU_ARCH_SEQ_CST, FI_XPU_SHM_SYS);
	fi_xpu_group_sync(&g);
	if (fi_xpu_group_leader(&g))
		fi_xpu_shm_progress(fi_xpu_shm_ep(ep));
	return fi_xpu_group_leave(&g, fi_xpu_shm_ep(ep) ? 0 : -FI_EINVAL);
}

/* The ordered-signalling extensions of fi_xpu/device.h. */
#define FI_XPU_DEVICE_SIGNAL_shm ~, 1

FI_XPU_FUNC int fi_xpu_put_signal_shm(struct fid_xpu_ep *ep, const void *buf, size_t len,
				      void *desc, void *dest_addr, uint64_t addr, uint64_t key,
				      uint64_t sig_addr, uint64_t sig_key, uint64_t signal,
				      int sig_op, void *context, uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_put_signal",
				fi_xpu_device_check_put_signal(flags, sig_addr, sig_op),
				fi_xpu_shm_put_signal_item(ep, buf, len, dest_addr, addr, key, sig_addr,
							   sig_key, signal, sig_op, context));
}

/* Every operation has placed its data when it returns: ordering later ones
 * after earlier ones needs only a system-scope fence. */
FI_XPU_FUNC int fi_xpu_fence_shm(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	struct fi_xpu_group g;
	int rc = fi_xpu_group_enter(&g, scope, "fi_xpu_fence");
	(void)flags;
	if (rc)
		return rc;
	fi_xpu_arch_fence(FI_XPU_ARCH_SEQ_CST, FI_XPU_SHM_SYS);
	return fi_xpu_group_leave(&g, fi_xpu_shm_ep(ep) ? 0 : -FI_EINVAL);
}

/* Complete means what fi_xpu_flush waits for. */
FI_XPU_FUNC int fi_xpu_quiet_shm(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	return fi_xpu_flush_shm(ep, flags, scope);
}

FI_XPU_FUNC void *fi_xpu_peer_ptr_shm(struct fid_xpu_ep *ep, void *dest_addr, uint64_t addr,
				      uint64_t key, size_t len)
{
	return fi_xpu_shm_peer_ptr_item(ep, dest_addr, addr, key, len);
}

FI_XPU_FUNC int64_t fi_xpu_shm_cq_read_item(const struct fid_xpu_cq *cq, void *buf, size_t count,
					    uint64_t *src_addr)
{
	return fi_xpu_shm_cq_read_any(cq, buf, count, src_addr, FI_XPU_WORK_ITEM);
}

FI_XPU_FUNC int64_t fi_xpu_shm_cq_readerr_item(const struct fid_xpu_cq *cq, void *buf,
					       uint64_t flags)
{
	return fi_xpu_shm_cq_readerr_any(cq, (struct fi_cq_err_entry *)buf, flags,
					 FI_XPU_WORK_ITEM);
}

/* Blocking read: waits until `threshold` entries (at least one, at most
 * `count`) have been read or an error entry is next, for at most the CQ's
 * timeout attribute (negative: no limit). -FI_ETIMEDOUT when nothing came. */
FI_XPU_FUNC int64_t fi_xpu_shm_cq_sread_item(const struct fid_xpu_cq *cq, void *buf, size_t count,
					     void *src_addr, uint64_t threshold)
{
	const struct fi_xpu_shm_cq_dev *q = fi_xpu_shm_cq(cq);
	if (!q || (!buf && count))
		return -FI_EINVAL;
	FI_XPU_GROUP_SREAD(fi_xpu_shm_cq_read_item, cq, buf, count, src_addr, threshold,
			   q->timeout_ms,
			   q->format == FI_CQ_FORMAT_CONTEXT ? sizeof(struct fi_cq_entry)
			   : q->format == FI_CQ_FORMAT_MSG   ? sizeof(struct fi_cq_msg_entry)
			   : q->format == FI_CQ_FORMAT_DATA  ? sizeof(struct fi_cq_data_entry)
							     : sizeof(struct fi_cq_tagged_entry),
			   q->abort);
}

/* The leader reads, every member gets its count or error. */
FI_XPU_GROUP_CQ_ENTRY_POINTS(shm, fi_xpu_shm_cq_read_item, fi_xpu_shm_cq_readerr_item,
			     fi_xpu_shm_cq_sread_item)

/* Counters: {value, errors} words private to the owner's process, plus,
 * for a counter bound for remote events, the words in the shared heap that
 * peers increment (fi_xpu/device_coop.h reads their sum), behind a local
 * device block; every work item of a scope may call these (reads are
 * idempotent, and updates are made once, by the scope's leader). */
FI_XPU_FUNC const struct fi_xpu_shm_cntr_dev *fi_xpu_shm_cntr_of(const struct fid_xpu_cntr *c)
{
	const struct fi_xpu_shm_cntr_dev *k =
		c ? FI_XPU_SHM_P(const struct fi_xpu_shm_cntr_dev, c->fid.prov_ctx)
		  : FI_XPU_I_NULL;
	return k && fi_xpu_handle_live(&k->magic, FI_XPU_HANDLE_CNTR)
		       ? k
		       : FI_XPU_I_NULL;
}

FI_XPU_FUNC uint64_t *fi_xpu_shm_cntr_words(const struct fid_xpu_cntr *c, const uint64_t **remote)
{
	const struct fi_xpu_shm_cntr_dev *k = fi_xpu_shm_cntr_of(c);
	*remote = k ? FI_XPU_SHM_P(const uint64_t, fi_xpu_shm_ld(&k->rcntr)) : FI_XPU_I_NULL;
	return k ? FI_XPU_SHM_P(uint64_t, k->cntr) : FI_XPU_I_NULL;
}

/* The abort word of the counter's context (0: none). */
FI_XPU_FUNC uint64_t fi_xpu_shm_cntr_abort(const struct fid_xpu_cntr *c)
{
	const struct fi_xpu_shm_cntr_dev *k = fi_xpu_shm_cntr_of(c);
	return k ? k->abort : 0;
}

FI_XPU_GROUP_CNTR_ENTRY_POINTS(shm, fi_xpu_shm_cntr_words, fi_xpu_shm_cntr_abort, FI_XPU_SHM_SYS)

#endif /* FI_XPU_INCLUDED_DEVICE_SHM_H */
