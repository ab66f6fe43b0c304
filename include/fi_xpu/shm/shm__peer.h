/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: peers and protection: regions of a peer,
 * targets and remote keys checked, the resolve table, the remote CQs and
 * counters of a target, the device blocks behind handles.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_PEER_H
#define FI_XPU_INCLUDED_SHM_SHM_PEER_H

#include <fi_xpu/shm/shm__complete.h>

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

#endif /* FI_XPU_INCLUDED_SHM_SHM_PEER_H */
